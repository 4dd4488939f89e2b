// CpuRuntime against ReferenceRuntime (the oracle) on programs lowered node
// for node from graphs (program_of): every dtype, views, reductions, indexing,
// iota, casts and symbolic dims; plus its error behaviour and buffer reuse.
// Tolerances are documented in cpu_test_support.hpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <luminal/luminal.hpp>

#include "cpu_test_support.hpp"

using cpu_test::Differential;
using cpu_test::Tol;
using luminal::DType;
using luminal::Expression;
using luminal::GraphTensor;
namespace ops = luminal::ops;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Uniform values with some NaN, infinities, zeros and huge values mixed in.
cpu_test::Generator specials(double lo, double hi) {
    return [lo, hi](std::size_t n, std::mt19937_64& rng) {
        std::vector<double> v = cpu_test::uniform(lo, hi)(n, rng);
        const double special[] = {kNaN, kInf, -kInf, 0.0, -0.0, 1e20, -1e20, 2.5, -2.5, 0.5, 255.9, 300.0};
        for (std::size_t i = 0; i < n; i += 3) v[i] = special[(i / 3) % std::size(special)];
        return v;
    };
}
}  // namespace

TEST_CASE("cpu runtime: float elementwise ops in every float dtype") {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        CAPTURE(luminal::name_of(t));
        Differential d;
        GraphTensor a = d.in({3, 300}, t), b = d.in({3, 300}, t, cpu_test::uniform(0.25, 3));
        d.out(a + b, "add");
        d.out(a * b, "mul");
        d.out(a % b, "mod");
        d.out(a % (-b), "mod by negative");
        d.out(a < b, "lt");
        d.out(a.exp2(), "exp2");
        d.out(b.log2(), "log2");
        d.out(a.log2(), "log2 of negatives is nan");
        d.out(a.sin(), "sin");
        d.out(b.sqrt(), "sqrt");
        d.out(b.recip(), "recip");
        d.out(a.sigmoid() * b, "sigmoid");
        d.out(a.silu(), "silu");
        d.out(a.maximum(b), "maximum");
        d.out(ops::where(a < 0.5, a, b), "where");
        d.out(a.eq(a), "eq");
        d.run();
    }
}

TEST_CASE("cpu runtime: integer and bool ops wrap in their width") {
    for (DType t : {DType::I32, DType::I64, DType::U8}) {
        CAPTURE(luminal::name_of(t));
        Differential d;
        auto big = t == DType::U8 ? cpu_test::integers(0, 255) : cpu_test::integers(-2000000000, 2000000000);
        GraphTensor a = d.in({4, 65}, t, big), b = d.in({4, 65}, t, big);
        GraphTensor m = d.in({4, 65}, t, t == DType::U8 ? cpu_test::integers(1, 20) : cpu_test::integers(-20, 20, true));
        d.out(a + b, "add (overflows)");
        d.out(a * b, "mul (overflows)");
        d.out(a % m, "floor mod");
        d.out(a < b, "lt");
        d.out(a.cast(DType::F32), "cast to f32");
        d.out(a.sum(1), "sum");
        d.out(a.max(0), "max");
        d.out(a.min(1), "min");
        d.run();
    }
    Differential d;
    GraphTensor p = d.in({5, 7}, DType::Bool), q = d.in({5, 7}, DType::Bool);
    d.out(p.logical_and(q), "and");
    d.out(p.logical_or(q), "or");
    d.out(p.logical_not(), "not");
    d.out(p < q, "lt");
    d.out(p.cast(DType::F32) * 2.5, "bool to f32");
    d.out(p.max(1), "any");
    d.run();
}

TEST_CASE("cpu runtime: casts between every dtype, with NaN, infinities and out-of-range values") {
    for (DType from : luminal::all_dtypes) {
        Differential d;
        GraphTensor x = d.in({97}, from, luminal::is_float(from) ? specials(-400, 400) : nullptr);
        for (DType to : luminal::all_dtypes) d.out(x.cast(to), fmt::format("{} -> {}", luminal::name_of(from), luminal::name_of(to)), Tol{0, 0});
        d.run();
    }
}

TEST_CASE("cpu runtime: views (permute, slice, pad, expand, concat, reshape)") {
    Differential d;
    GraphTensor x = d.in({4, 6}), y = d.in({6}), z = d.in({2, 3, 4});
    d.out(x.permute({1, 0}) * 1.0, "permute");
    d.out(x.slice_along(1, 1, 5) + 0.0, "slice");
    d.out(x.pad_along(0, 2, 1) + 0.0, "pad");
    d.out(x.pad({{1, 2}, {3, 0}}, 0.0).permute({1, 0}) * 2.0, "pad both axes then permute");
    d.out(x.slice_along(0, 1, 3).pad_along(1, 1, 1) * 1.0, "slice then pad");
    d.out(x + y.expand_dim(0, 4), "broadcast row");
    d.out(x.concat_along(x * 2.0, 0), "concat");
    d.out(x.permute({1, 0}).reshape({3, 8}) * 1.0, "reshape of a permuted view");
    d.out(z.permute({2, 0, 1}).slice_along(0, 1, 3) * 1.0, "3-d permute + slice");
    d.out(z.expand_dim(1, 5) * 1.0, "expand middle axis");
    d.out(x.pad_along(1, 2, 2, 1.5), "pad with a value");
    d.out(x.slice_along(1, 1, 5).contiguous(), "contiguous of a slice");
    d.run();
}

TEST_CASE("cpu runtime: reductions over every axis, through views, with NaN") {
    for (DType t : {DType::F32, DType::F16, DType::I32}) {
        CAPTURE(luminal::name_of(t));
        Differential d;
        GraphTensor x = d.in({3, 4, 5}, t);
        Tol tol = cpu_test::default_tol(t);
        if (t == DType::F32) tol = {1e-5, 1e-5};
        for (int axis = 0; axis < 3; ++axis) {
            d.out(x.sum(axis), fmt::format("sum axis {}", axis), tol);
            d.out(x.max(axis), fmt::format("max axis {}", axis), tol);
            d.out(x.permute({2, 0, 1}).sum(axis), fmt::format("permuted sum axis {}", axis), tol);
            d.out(x.pad_along(2, 1, 2).max(axis), fmt::format("padded max axis {}", axis), tol);
            d.out(x.slice_along(1, 1, 3).sum(axis), fmt::format("sliced sum axis {}", axis), tol);
        }
        d.out(x.sum(luminal::Axes{0, 2}), "sum two axes", tol);
        d.out(x.expand_dim(1, 4).sum(1), "sum over a broadcast axis", tol);
        d.run();
    }
    Differential d;
    GraphTensor x = d.in({6, 50}, DType::F32, specials(-3, 3)), w = d.in({6, 50});
    d.out(x.max(1), "max with nan / inf rows");
    d.out(x.sum(1), "sum with nan / inf rows");
    d.out(w.softmax(1), "softmax");
    d.out(w.layer_norm({1}), "layer_norm", {1e-4, 1e-4});
    d.out(w.mean(0), "mean");
    d.out(w.var({1}), "var", {1e-4, 1e-4});
    d.out(w.argmax(1), "argmax");
    d.out(w.logsumexp({0}), "logsumexp");
    d.run();
}

TEST_CASE("cpu runtime: long reductions stay within f32 tolerance") {
    Differential d;
    GraphTensor x = d.in({4, 5000}, DType::F32, cpu_test::uniform(0, 1));
    d.out(x.sum(1), "row sums", {1e-4, 1e-5});
    d.out(x.permute({1, 0}).sum(0), "column-major sums", {1e-4, 1e-5});
    d.out(x.max(1), "row max");
    d.run();
}

TEST_CASE("cpu runtime: matmul from primitives") {
    Differential d;
    GraphTensor a = d.in({5, 9}), b = d.in({9, 7}), c = d.in({2, 5, 9});
    d.out(a.matmul(b), "2-d", {1e-5, 1e-4});
    d.out(c.matmul(b), "batched", {1e-5, 1e-4});
    d.out(a.matmul(a.t()), "a a^T", {1e-5, 1e-4});
    d.run();
}

// One row times a weight [out, in] (a decode step's projection): in a build without
// AVX2 (this one) few_rows.hpp reads the weight in place; out sizes off a multiple of
// its 8-row groups and in sizes off its vector width take the tails.
TEST_CASE("cpu runtime: one f32 row times a weight read in place") {
    Differential d;
    GraphTensor x = d.in({1, 70}), w = d.in({37, 70}), wide = d.in({1, 768}), proj = d.in({256, 768});
    d.out(x.matmul(w.t()), "1x70 by 37x70", {1e-5, 1e-4});
    d.out(wide.matmul(proj.t()), "1x768 by 256x768", {1e-5, 1e-4});
    d.out(x.matmul(w.t()).matmul(w), "then a weight stored [in, out]", {1e-5, 1e-4});
    d.run();
}

TEST_CASE("cpu runtime: gather, scatter and the ordering ops built on them") {
    Differential d;
    GraphTensor data = d.in({6, 8}), idx = d.in({10}, DType::I32, cpu_test::integers(0, 47));
    GraphTensor rows = d.in({4}, DType::I64, cpu_test::integers(0, 5));
    GraphTensor elems = d.in({6, 3}, DType::I32, cpu_test::integers(0, 7));
    GraphTensor dup = d.in({12}, DType::I32, cpu_test::integers(0, 5));  // repeated indexes: last write wins
    GraphTensor src = d.in({12}), dest = d.in({6});
    d.out(data.gather(idx), "flat gather");
    d.out(data.permute({1, 0}).gather(idx), "gather through a permuted view");
    d.out(data.pad_along(1, 1, 1).gather(idx), "gather reads padding as 0");
    d.out(data.index_select(0, rows), "index_select (embedding)");
    d.out(data.gather_elements(elems, 1), "gather_elements");
    d.out(dest.scatter(dup, src), "scatter with duplicates");
    d.out(data.scatter_elements(1, elems, data.slice_along(1, 0, 3) * 10.0), "scatter_elements");
    d.out(data.argsort(1), "argsort");
    d.out(data.topk(3, 1), "topk");
    d.out(data.cumsum(1), "cumsum", {1e-5, 1e-4});
    d.out(rows.one_hot(6), "one_hot");
    d.run();
}

TEST_CASE("cpu runtime: iota, arange and masks") {
    Differential d;
    GraphTensor x = d.in({5, 5});
    luminal::Graph& g = d.g;
    d.out(g.arange(37), "arange");
    d.out(g.arange(10, DType::I64) * 3 + 1, "arange i64");
    d.out(g.iota(Expression::index() / 4 % 3 - Expression::index() % 5 * 2, {3, 20}, DType::I32), "index algebra");
    d.out(g.arange_options(-1.5, 2.0, 0.25, DType::F32), "float arange");
    d.out(g.arange_options(0, 8, 1, DType::F16), "f16 arange");
    d.out(x.tril(), "tril");
    d.out(x.triu(1), "triu");
    d.out(g.iota(Expression::index(), {4}, DType::U8).expand_dim(0, 3) + 250, "u8 iota broadcast, wraps");
    d.run();
}

TEST_CASE("cpu runtime: symbolic dims at two sizes; weights persist across executions") {
    Differential d;
    d.g.set_dim('s', 3);
    GraphTensor x = d.in({'s', 8}), w = d.in({8});
    d.out((x * w.expand_dim(0, 's')).softmax(1), "softmax over rows");
    d.out(x.sum(0), "sum over s");
    d.out(x.permute({1, 0}).pad_along(1, 1, 0) * 1.0, "permute + pad with s");
    d.out(d.g.arange('s') * 2, "arange s");
    d.run({{'s', 3}}, 1);
    d.run({{'s', 17}}, 2);

    // The weight is bound once; only x changes with the size.
    luminal::Graph g;
    GraphTensor xs = g.tensor({'s', 4}), ws = g.tensor({4});
    GraphTensor y = (xs * ws.expand_dim(0, 's')).sum(1).output();
    luminal::CpuRuntime rt;
    rt.load(luminal::program_of(g));
    rt.set_data(ws, {1, 2, 3, 4});
    for (std::int64_t s : {2, 5, 2}) {
        std::vector<float> xv(static_cast<std::size_t>(s * 4), 1.0f);
        xv[0] = 2;
        rt.set_data(xs, xv);
        rt.execute({{'s', s}});
        std::vector<float> got = rt.get_f32(y);
        REQUIRE(got.size() == static_cast<std::size_t>(s));
        CHECK(got[0] == 11);
        CHECK(got[static_cast<std::size_t>(s - 1)] == 10);
    }
}

TEST_CASE("cpu runtime: Graph::compile with CpuRuntime") {
    luminal::Graph g;
    GraphTensor a = g.tensor({2, 3}), b = g.tensor({3, 2});
    GraphTensor c = a.matmul(b).relu().output();
    auto rt = g.compile(luminal::CpuRuntime{});
    rt.set_data(a, {1, 2, 3, 4, 5, 6});
    rt.set_data(b, {1, -1, 0, 1, -1, 1});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(c) == std::vector<float>{0, 4, 0, 7});  // [[1-3, -1+2+3], [4-6, -4+5+6]] relu'd
    CHECK(rt.get<std::int64_t>(c) == std::vector<std::int64_t>{0, 4, 0, 7});
}

TEST_CASE("cpu runtime: error behaviour matches the reference") {
    luminal::Graph g;
    GraphTensor x = g.tensor({'s', 2}), w = g.tensor({3}), idx = g.tensor({2}, DType::I32);
    GraphTensor m = g.tensor({3}, DType::I32), k = g.tensor({3}, DType::I32);
    GraphTensor sum = x.sum(1).output(), gathered = w.gather(idx).output(), mod = (m % k).output();
    GraphTensor scattered = w.scatter(idx, w.slice_along(0, 0, 2)).output();
    GraphTensor not_output = w * 2.0;
    luminal::CpuRuntime rt;
    rt.load(luminal::program_of(g));

    auto message = [](auto&& f) {
        try {
            f();
        } catch (const luminal::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(message([&] { rt.set_data(not_output, {1, 2, 3}); }).find("is not an input") != std::string::npos);
    CHECK(message([&] { rt.set_data(w, {1, 2}); }).find("3 elements") != std::string::npos);
    rt.set_data(w, {1, 2, 3});
    rt.set_data(idx, std::vector<std::int32_t>{0, 2});
    rt.set_data(m, std::vector<std::int32_t>{7, -7, 5});
    rt.set_data(k, std::vector<std::int32_t>{3, 3, 2});
    CHECK(message([&] { rt.execute({{'s', 2}}); }).find("input 'input0' (node 0) has no data") != std::string::npos);
    rt.set_data(x, {1, 2, 3, 4, 5});  // dynamic: length checked at execute
    CHECK(message([&] { rt.execute({}); }).find("dynamic dimension 's' is not set") != std::string::npos);
    CHECK(message([&] { rt.execute({{'s', 2}}); }).find("has 5 values") != std::string::npos);
    CHECK(message([&] { rt.get_f32(sum); }).find("has not been computed") != std::string::npos);
    rt.set_data(x, {1, 2, 3, 4});
    rt.execute({{'s', 2}});
    CHECK(rt.get_f32(sum) == std::vector<float>{3, 7});
    CHECK(rt.get_f32(gathered) == std::vector<float>{1, 3});
    CHECK(rt.get<std::int32_t>(mod) == std::vector<std::int32_t>{1, 2, 1});
    CHECK(rt.get_f32(scattered) == std::vector<float>{1, 2, 2});
    CHECK(message([&] { rt.get_f32(not_output); }).find("is not an output") != std::string::npos);

    rt.set_data(idx, std::vector<std::int32_t>{0, 3});
    std::string gather_error = message([&] { rt.execute({{'s', 2}}); });
    CHECK(gather_error.find("Gather") != std::string::npos);
    CHECK(gather_error.find("index 3 at position 1 is out of range for 3 elements") != std::string::npos);
    rt.set_data(idx, std::vector<std::int32_t>{-1, 0});
    CHECK(message([&] { rt.execute({{'s', 2}}); }).find("index -1 at position 0 is out of range") != std::string::npos);
    rt.set_data(idx, std::vector<std::int32_t>{0, 1});
    rt.set_data(k, std::vector<std::int32_t>{3, 0, 2});
    CHECK(message([&] { rt.execute({{'s', 2}}); }).find("integer modulo by zero at element 1") != std::string::npos);
    rt.set_data(k, std::vector<std::int32_t>{3, 3, 2});
    rt.execute({{'s', 2}});  // recovers after errors: the pool is consistent again
    CHECK(rt.get_f32(sum) == std::vector<float>{3, 7});

    // Scatter bounds are checked against the output size.
    luminal::Graph g2;
    GraphTensor dest = g2.tensor({3}), at = g2.tensor({1}, DType::I64), src = g2.tensor({1});
    GraphTensor out = dest.scatter(at, src).output();
    luminal::CpuRuntime rt2;
    rt2.load(luminal::program_of(g2));
    rt2.set_data(dest, {0, 0, 0});
    rt2.set_data(src, {5});
    rt2.set_data(at, std::vector<std::int64_t>{3});
    CHECK(message([&] { rt2.execute({}); }).find("Scatter: node") != std::string::npos);
    rt2.set_data(at, std::vector<std::int64_t>{2});
    rt2.execute({});
    CHECK(rt2.get_f32(out) == std::vector<float>{0, 0, 5});
}

TEST_CASE("cpu runtime: intermediate buffers are reused by liveness") {
    luminal::Graph g;
    GraphTensor x = g.tensor({1024});
    GraphTensor y = x;
    const int chain = 20;
    for (int i = 0; i < chain; ++i) y = (y * 1.001).sin();
    GraphTensor out = y.output();
    luminal::Program p = luminal::program_of(g);
    std::size_t intermediates = 0;
    for (auto& n : p.nodes) {
        auto kind = static_cast<luminal::OpKind>(n.spec.kind);
        if (kind != luminal::OpKind::Input && kind != luminal::OpKind::Output)
            intermediates += static_cast<std::size_t>(cpu_test::numel(n.spec.shape, {})) * luminal::size_of(n.spec.dtype);
    }
    luminal::CpuRuntime rt;
    rt.load(p);
    std::vector<float> xv(1024, 0.5f);
    rt.set_data(x, xv);
    rt.execute({});
    std::size_t peak = rt.peak_bytes();
    CHECK(intermediates >= chain * 2 * 4096);
    CHECK(peak <= 2 * 4096 + 1024);  // two live [1024] f32 buffers (+ a few scalar constants)
    rt.execute({});
    CHECK(rt.peak_bytes() == peak);  // the steady state allocates nothing new

    luminal::ReferenceRuntime ref;
    ref.load(p);
    ref.set_data(x, xv);
    ref.execute({});
    cpu_test::compare(rt, ref, out, {1e-5, 1e-5}, "chain result");
}

// The instruction sets whose lane loops this CPU runs (the portable ones always).
std::vector<luminal::cpu::quant::Isa> lane_isas_here() {
    using luminal::cpu::quant::Isa;
    std::vector<Isa> out;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni})
        if (luminal::cpu::quant::supports(isa)) out.push_back(isa);
    return out;
}

TEST_CASE("cpu runtime: the vectorised sin is libm's sin, correctly rounded, over rotary angles and beyond") {
    // Rotary angles are position x frequency: up to ~2e5 radians at 128K tokens.
    std::vector<float> x;
    std::mt19937_64 rng(7);
    for (double hi : {1.0, 10.0, 1e3, 2e5, 1e6}) {
        std::uniform_real_distribution<double> u(-hi, hi);
        for (int i = 0; i < 20000; ++i) x.push_back(static_cast<float>(u(rng)));
    }
    for (float special : {0.0f, -0.0f, 1e-30f, 1.5707964f, 3.1415927f, 1e6f, 1.5e6f, 1e20f, -1e20f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
        x.push_back(special);
    using luminal::cpu::fused_detail::LaneOp;
    for (luminal::cpu::quant::Isa isa : lane_isas_here()) {
        CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
        std::vector<float> got(x.size());
        luminal::cpu::fused_detail::lane_loops(isa)[static_cast<std::size_t>(LaneOp::Sin)](
            x.data(), nullptr, got.data(), static_cast<std::int64_t>(x.size()));
        std::size_t off_by_one_ulp = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float want = static_cast<float>(std::sin(static_cast<double>(x[i])));
            CAPTURE(x[i]);
            if (std::isnan(want)) {
                CHECK(std::isnan(got[i]));
                continue;
            }
            CHECK(std::signbit(got[i]) == std::signbit(want));
            if (got[i] != want) {
                ++off_by_one_ulp;
                CHECK(got[i] == std::nextafter(want, got[i] > want ? 1.0f : -1.0f));
            }
        }
        CHECK(off_by_one_ulp * 1000 < x.size());  // a tie's rounding at most
    }
}

TEST_CASE("cpu runtime: the lane loops of every instruction set: exp2 within 2 ulp of libm's, arithmetic exact") {
    std::vector<float> x, y;
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(-160.0, 140.0), v(-4.0, 4.0);
    for (int i = 0; i < 4099; ++i) {  // not a multiple of any vector width: the loops' tails too
        x.push_back(static_cast<float>(u(rng)));
        y.push_back(static_cast<float>(v(rng)));
    }
    for (float special : {0.0f, -0.0f, 0.5f, -0.5f, 128.0f, 129.0f, -149.0f, -151.0f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
        x.push_back(special);
        y.push_back(special);
    }
    const auto n = static_cast<std::int64_t>(x.size());
    using luminal::cpu::fused_detail::LaneOp;
    for (luminal::cpu::quant::Isa isa : lane_isas_here()) {
        CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
        const auto loops = luminal::cpu::fused_detail::lane_loops(isa);
        std::vector<float> exp2(x.size()), recip(x.size()), sum(x.size()), product(x.size());
        loops[static_cast<std::size_t>(LaneOp::Exp2)](x.data(), nullptr, exp2.data(), n);
        loops[static_cast<std::size_t>(LaneOp::Recip)](y.data(), nullptr, recip.data(), n);
        loops[static_cast<std::size_t>(LaneOp::Add)](x.data(), y.data(), sum.data(), n);
        loops[static_cast<std::size_t>(LaneOp::Mul)](x.data(), y.data(), product.data(), n);
        for (std::size_t i = 0; i < x.size(); ++i) {
            CAPTURE(x[i]);
            CAPTURE(y[i]);
            const float want = std::exp2(x[i]);
            if (std::isnan(want)) {
                CHECK(std::isnan(exp2[i]));
            } else if (std::isinf(want)) {
                CHECK(exp2[i] == want);
            } else {  // 2 ulp relative, or two of the smallest subnormal's
                CHECK(std::fabs(exp2[i] - want) <= std::max(2.4e-7f * want, 2 * std::numeric_limits<float>::denorm_min()));
            }
            const float r = 1.0f / y[i], a = x[i] + y[i], m = x[i] * y[i];
            CHECK(((recip[i] == r) || (std::isnan(r) && std::isnan(recip[i]))));
            CHECK(((sum[i] == a) || (std::isnan(a) && std::isnan(sum[i]))));
            CHECK(((product[i] == m) || (std::isnan(m) && std::isnan(product[i]))));
        }
    }
}

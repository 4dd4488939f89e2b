// CpuRuntime's backend ops in hand-built programs:
//  * Matmul (2-D, batched, broadcast batch, transposed / strided / padded
//    operands, f16, i32, f32 times f16/bf16) against a naive double-precision triple loop written
//    here, reading the operands through luminal::BoundView;
//  * FusedElementwise: a region of elementwise primitives in a graph is turned
//    into one fused node here, and the result compared with the same graph run
//    primitive by primitive on ReferenceRuntime.
// Tolerances are documented in cpu_test_support.hpp.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>
#include <map>
#include <optional>

#include "cpu_test_support.hpp"

using cpu_test::ProgramBuilder;
using cpu_test::Tol;
using luminal::DType;
using luminal::Expression;
using luminal::GraphTensor;
using luminal::OpKind;
using luminal::ShapeTracker;

namespace {

// ---------------------------------------------------------------------------
// Matmul

struct MatmulCase {
    std::string name;
    luminal::Shape a_shape, b_shape;  // stored (contiguous) shapes of the inputs
    ShapeTracker a_view, b_view;      // how the Matmul reads them: [.., m, k] and [.., n, k]
    DType dtype = DType::F32;         // of a and of the result
    std::optional<DType> b_dtype = std::nullopt;  // of b, when not `dtype` (an f32 product of an f16/bf16 b)
};

// out[.., i, j] = sum_k a[.., i, k] * b[.., j, k] in double, from logical views.
std::vector<double> naive_matmul(const MatmulCase& c, const std::vector<double>& a, const std::vector<double>& b) {
    luminal::BoundView av(c.a_view, {}), bv(c.b_view, {});
    luminal::Shape ad = c.a_view.dims(), bd = c.b_view.dims();
    std::size_t r = ad.size();
    std::int64_t m = ad[r - 2].eval({}), k = ad[r - 1].eval({}), n = bd[r - 2].eval({});
    std::int64_t batches = 1;
    for (std::size_t i = 0; i + 2 < r; ++i) batches *= ad[i].eval({});
    auto at = [](const luminal::BoundView& v, const std::vector<double>& data, std::int64_t i) {
        std::int64_t p = v.locate(i);
        return p < 0 ? 0.0 : data[static_cast<std::size_t>(p)];
    };
    std::vector<double> out(static_cast<std::size_t>(batches * m * n));
    for (std::int64_t q = 0; q < batches; ++q)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::int64_t x = 0; x < k; ++x)
                    acc += at(av, a, (q * m + i) * k + x) * at(bv, b, (q * n + j) * k + x);
                out[static_cast<std::size_t>((q * m + i) * n + j)] = acc;
            }
    return out;
}

void check_matmul(const MatmulCase& c) {
    INFO("matmul case: " << c.name);
    ProgramBuilder pb;
    const DType b_dtype = c.b_dtype.value_or(c.dtype);
    GraphTensor a = pb.g.tensor(c.a_shape, c.dtype), b = pb.g.tensor(c.b_shape, b_dtype);
    std::uint32_t ia = pb.input(a), ib = pb.input(b);
    luminal::Shape out_shape = c.a_view.dims();
    out_shape.back() = c.b_view.dims()[c.b_view.rank() - 2];
    std::uint32_t mm = pb.node(luminal::MatmulOp{}, {c.a_view, c.b_view}, {ia, ib},
                               out_shape, c.dtype);
    GraphTensor out = pb.output(mm);

    std::mt19937_64 rng(7);
    auto gen = luminal::is_float(c.dtype) ? cpu_test::uniform(-1, 1) : cpu_test::integers(-1000, 1000);
    std::vector<double> av = gen(static_cast<std::size_t>(cpu_test::numel(c.a_shape, {})), rng);
    std::vector<double> bv = gen(static_cast<std::size_t>(cpu_test::numel(c.b_shape, {})), rng);
    // The reference multiplies the values the 16-bit inputs actually hold.
    auto held = [](DType t, std::vector<double>& values) {
        for (double& x : values) {
            if (t == DType::F16) x = luminal::f16_bits_to_f32(luminal::f32_to_f16_bits(static_cast<float>(x)));
            if (t == DType::BF16) x = luminal::bf16_bits_to_f32(luminal::f32_to_bf16_bits(static_cast<float>(x)));
        }
    };
    held(c.dtype, av);
    held(b_dtype, bv);

    luminal::CpuRuntime rt;
    rt.load(pb.program);
    cpu_test::bind_input(rt, a, av);
    cpu_test::bind_input(rt, b, bv);
    rt.execute({});
    std::vector<double> want = naive_matmul(c, av, bv);
    if (luminal::is_float(c.dtype)) {
        std::vector<double> got = rt.get<double>(out);
        REQUIRE(got.size() == want.size());
        Tol tol = c.dtype == DType::F32 ? Tol{1e-5, 1e-5} : Tol{4e-3, 4e-3};
        std::size_t bad = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
            if (std::abs(got[i] - want[i]) > tol.abs + tol.rel * std::abs(want[i]) && bad++ < 4)
                FAIL_CHECK("[" << i << "] got " << got[i] << " want " << want[i]);
        CHECK(bad == 0);
    } else {
        std::vector<std::int64_t> got = rt.get<std::int64_t>(out);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            CHECK(got[i] == static_cast<std::int32_t>(static_cast<std::int64_t>(want[i])));
    }
}

// A [rows, cols] view whose column stride is 2: every other element of [rows, 2 * cols].
ShapeTracker every_other_column(std::int64_t rows, std::int64_t cols) {
    ShapeTracker v = *ShapeTracker({rows, 2 * cols}).split_dims(1, 2);
    return *v.slice(2, 0, 1).reshape({rows, cols});
}

}  // namespace

TEST_CASE("cpu backend: Matmul against a naive triple loop") {
    using S = luminal::Shape;
    std::vector<MatmulCase> cases = {
        {"2-d", S{5, 7}, S{6, 7}, ShapeTracker({5, 7}), ShapeTracker({6, 7})},
        {"a transposed (column-major)", S{7, 5}, S{6, 7}, ShapeTracker({7, 5}).permute({1, 0}), ShapeTracker({6, 7})},
        {"b transposed: a plain a @ b", S{5, 7}, S{7, 6}, ShapeTracker({5, 7}), ShapeTracker({7, 6}).permute({1, 0})},
        {"batched", S{3, 5, 7}, S{3, 6, 7}, ShapeTracker({3, 5, 7}), ShapeTracker({3, 6, 7})},
        {"broadcast batch of b", S{3, 5, 7}, S{6, 7}, ShapeTracker({3, 5, 7}), ShapeTracker({6, 7}).expand_dim(0, 3)},
        {"permuted batch axis", S{5, 3, 7}, S{3, 6, 7}, ShapeTracker({5, 3, 7}).permute({1, 0, 2}), ShapeTracker({3, 6, 7})},
        {"column stride 2 (packed)", S{5, 14}, S{6, 7}, every_other_column(5, 7), ShapeTracker({6, 7})},
        {"sliced rows and columns", S{9, 10}, S{6, 7}, ShapeTracker({9, 10}).slice(0, 2, 7).slice(1, 3, 10),
         ShapeTracker({6, 7})},
        {"padded k (reads zeros)", S{5, 5}, S{6, 7}, ShapeTracker({5, 5}).pad(1, 1, 1), ShapeTracker({6, 7})},
        {"vector times matrix", S{1, 33}, S{40, 33}, ShapeTracker({1, 33}), ShapeTracker({40, 33})},
        {"matrix times vector", S{40, 33}, S{1, 33}, ShapeTracker({40, 33}), ShapeTracker({1, 33})},
        {"broadcast rows of a", S{1, 8}, S{4, 8}, ShapeTracker({1, 8}).expand(0, 5), ShapeTracker({4, 8})},
        {"empty k", S{3, 0}, S{4, 0}, ShapeTracker({3, 0}), ShapeTracker({4, 0})},
        {"large (blocked GEMM)", S{70, 130}, S{90, 130}, ShapeTracker({70, 130}), ShapeTracker({90, 130})},
        {"f16", S{2, 9, 33}, S{2, 11, 33}, ShapeTracker({2, 9, 33}), ShapeTracker({2, 11, 33}), DType::F16},
        {"f16 transposed", S{33, 9}, S{11, 33}, ShapeTracker({33, 9}).permute({1, 0}), ShapeTracker({11, 33}),
         DType::F16},
        {"i32 (wraps)", S{4, 6}, S{5, 6}, ShapeTracker({4, 6}), ShapeTracker({5, 6}), DType::I32},
        // An f32 product with a 16-bit b: up to 8 rows of a read b in place and
        // widen it (sums in 16 lanes, a tail of k % 16); more rows, or b rows
        // that are not contiguous, go through an f32 copy of b and the GEMM.
        {"f32 x bf16 rows, one row of a", S{1, 70}, S{9, 70}, ShapeTracker({1, 70}), ShapeTracker({9, 70}), DType::F32,
         DType::BF16},
        {"f32 x f16 rows, 8 rows, broadcast batch", S{2, 8, 48}, S{5, 48}, ShapeTracker({2, 8, 48}),
         ShapeTracker({5, 48}).expand_dim(0, 2), DType::F32, DType::F16},
        {"f32 x bf16 rows, a column-major", S{40, 3}, S{6, 40}, ShapeTracker({40, 3}).permute({1, 0}),
         ShapeTracker({6, 40}), DType::F32, DType::BF16},
        {"f32 x bf16, 9 rows of a (copied)", S{9, 20}, S{4, 20}, ShapeTracker({9, 20}), ShapeTracker({4, 20}),
         DType::F32, DType::BF16},
        {"f32 x bf16 columns (copied)", S{2, 20}, S{20, 4}, ShapeTracker({2, 20}), ShapeTracker({20, 4}).permute({1, 0}),
         DType::F32, DType::BF16},
    };
    for (const MatmulCase& c : cases) check_matmul(c);
}

namespace {

// ---------------------------------------------------------------------------
// FusedElementwise

// Turns the elementwise region computing `output`'s input into one fused node:
// graph Inputs become the node's inputs (read through the views their
// consumers used), Constants and Iotas become steps, every other node a step.
luminal::Program fuse_region(const luminal::Graph& g, const GraphTensor& output) {
    struct Operand {
        bool input;
        std::uint16_t index;
    };
    struct ProtoStep {
        luminal::FusedStep step;
        Operand a{false, 0}, b{false, 0};
    };
    std::vector<std::pair<luminal::NodeId, ShapeTracker>> inputs;
    std::vector<ProtoStep> steps;
    std::map<luminal::NodeId, std::uint16_t> memo;

    std::function<Operand(luminal::NodeId, const ShapeTracker&)> visit = [&](luminal::NodeId id, const ShapeTracker& view) {
        const luminal::Node& n = g.node(id);
        if (n.op.kind == OpKind::Input) {
            for (std::size_t i = 0; i < inputs.size(); ++i)
                if (inputs[i].first == id && inputs[i].second == view) return Operand{true, static_cast<std::uint16_t>(i)};
            inputs.emplace_back(id, view);
            return Operand{true, static_cast<std::uint16_t>(inputs.size() - 1)};
        }
        REQUIRE_MESSAGE(!view.is_padded_or_masked(), "a padded read of an internal node cannot be fused");
        ProtoStep s{luminal::FusedStep{n.op.kind, 0, 0, n.dtype, 0, Expression()}};
        if (n.op.kind == OpKind::Constant) {
            s.step.value = n.op.value;
        } else if (n.op.kind == OpKind::Iota) {
            s.step.iota = n.op.iota.substitute_index(view.index_expression());
        } else {
            REQUIRE_MESSAGE(view.is_contiguous(), "internal nodes must be read contiguously");
            if (auto it = memo.find(id); it != memo.end()) return Operand{false, it->second};
            REQUIRE((luminal::is_unary(n.op.kind) || luminal::is_binary(n.op.kind) || n.op.kind == OpKind::Cast));
            s.a = visit(n.inputs[0].source, n.inputs[0].view);
            if (n.inputs.size() > 1) s.b = visit(n.inputs[1].source, n.inputs[1].view);
        }
        steps.push_back(s);
        auto index = static_cast<std::uint16_t>(steps.size() - 1);
        if (n.op.kind != OpKind::Constant && n.op.kind != OpKind::Iota) memo[id] = index;
        return Operand{false, index};
    };
    const luminal::Node& out = g.node(output.id());
    visit(out.inputs[0].source, out.inputs[0].view);

    auto program = std::make_shared<luminal::FusedProgram>();
    auto slot = [&](Operand o) { return static_cast<std::uint16_t>(o.input ? o.index : inputs.size() + o.index); };
    for (ProtoStep& s : steps) {
        s.step.a = slot(s.a);
        s.step.b = slot(s.b);
        program->steps.push_back(s.step);
    }
    luminal::Program p;
    std::vector<ShapeTracker> views;
    std::vector<std::uint32_t> sources;
    std::map<luminal::NodeId, std::uint32_t> input_node;
    for (auto& [id, view] : inputs) {
        if (!input_node.count(id)) {
            luminal::ProgramNode in;
            const luminal::Node& n = g.node(id);
            in.spec.kind = luminal::symbol_of(OpKind::Input);
            in.spec.op = n.op;
            in.spec.shape = n.shape;
            in.spec.dtype = n.dtype;
            in.spec.hlir = id;
            input_node[id] = static_cast<std::uint32_t>(p.nodes.size());
            p.nodes.push_back(in);
        }
        views.push_back(view);
        sources.push_back(input_node[id]);
    }
    luminal::ProgramNode fused;
    fused.spec = luminal::NodeSpec::backend(luminal::FusedElementwiseOp{program}, views, out.shape, out.dtype);
    fused.sources = sources;
    p.nodes.push_back(fused);
    luminal::ProgramNode o;
    o.spec.kind = luminal::symbol_of(OpKind::Output);
    o.spec.op = out.op;
    o.spec.views = {ShapeTracker(out.shape)};
    o.spec.shape = out.shape;
    o.spec.dtype = out.dtype;
    o.spec.hlir = output.id();
    o.sources = {static_cast<std::uint32_t>(p.nodes.size() - 1)};
    p.nodes.push_back(o);
    return p;
}

// Runs the fused program on CpuRuntime and the primitive graph on the
// reference, with the same random inputs; also checks the fusion took place.
void check_fused(const std::string& name, luminal::Graph& g, const GraphTensor& out,
                 const std::vector<std::pair<GraphTensor, cpu_test::Generator>>& inputs, std::size_t min_steps,
                 Tol tol) {
    INFO("fused case: " << name);
    luminal::Program fused = fuse_region(g, out);
    REQUIRE(fused.nodes[fused.nodes.size() - 2].spec.payload_as<luminal::FusedElementwiseOp>()->program->steps.size() >= min_steps);
    luminal::CpuRuntime rt;
    luminal::ReferenceRuntime ref;
    rt.load(fused);
    ref.load(luminal::program_of(g));
    std::mt19937_64 rng(3);
    for (auto& [t, gen] : inputs) {
        std::vector<double> v = gen(static_cast<std::size_t>(cpu_test::numel(t.shape(), {})), rng);
        cpu_test::bind_input(rt, t, v);
        cpu_test::bind_input(ref, t, v);
    }
    rt.execute({});
    ref.execute({});
    cpu_test::compare(rt, ref, out, tol, name);
}

}  // namespace

TEST_CASE("cpu backend: FusedElementwise against the same primitives on the reference") {
    auto u = cpu_test::uniform(-3, 3);
    {
        // silu(x) * y with x read transposed and y broadcast along rows; 1000
        // elements, so the last block is partial.
        luminal::Graph g;
        GraphTensor x = g.tensor({40, 25}), y = g.tensor({40});
        GraphTensor r = (x.permute({1, 0}).silu() * y.expand_dim(0, 25)).output();
        check_fused("silu(x^T) * broadcast y", g, r, {{x, u}, {y, u}}, 6, {1e-5, 1e-5});
    }
    {
        // A padded and a sliced input, constants, unary and binary steps.
        luminal::Graph g;
        GraphTensor x = g.tensor({6, 9}), z = g.tensor({8, 12});
        GraphTensor a = x.pad({{1, 1}, {2, 1}}, 0.0);  // [8, 12]
        GraphTensor r = ((a * 0.5 + z.sin()).exp2() % 1.75 + a.sqrt().recip()).output();
        check_fused("padded + unary/binary chain", g, r, {{x, cpu_test::uniform(0.1, 2)}, {z, u}}, 8, {1e-5, 1e-5});
    }
    {
        // Mixed dtypes: iota, integer mod and compare, casts back to float.
        luminal::Graph g;
        GraphTensor x = g.tensor({7, 50}), k = g.tensor({50}, DType::I32);
        GraphTensor pos = g.iota(Expression::index() % 50 * 3 + Expression::index() / 50, {7, 50}, DType::I32);
        GraphTensor mask = ((pos + k.expand_dim(0, 7)) % 7) < 4;
        GraphTensor r = (mask.cast(DType::F32) * x + pos.cast(DType::F32) * 0.01).output();
        check_fused("iota / int mod / lt / cast", g, r, {{x, u}, {k, cpu_test::integers(-100, 100)}}, 8,
                    {1e-5, 1e-5});
    }
    {
        // f16 and bf16 arithmetic inside one region, rounded at every step.
        luminal::Graph g;
        GraphTensor x = g.tensor({300}, DType::F16), y = g.tensor({300}, DType::BF16);
        GraphTensor h = (x * x + 1.0).sqrt() * x.sigmoid();
        GraphTensor r = (h.cast(DType::F32) + y.cast(DType::F32).exp()).cast(DType::F16).output();
        check_fused("f16 / bf16 chain", g, r, {{x, u}, {y, u}}, 10, {2e-3, 4e-3});
    }
    {
        // An integer-only region with wrap-around and a u8 result.
        luminal::Graph g;
        GraphTensor a = g.tensor({9, 31}, DType::I64), b = g.tensor({31}, DType::I64);
        GraphTensor r = ((a * b.expand_dim(0, 9) + 1000).cast(DType::U8) * 3).output();
        check_fused("i64 -> u8 wrap", g, r, {{a, cpu_test::integers(-1000000, 1000000)}, {b, cpu_test::integers(-999, 999)}},
                    4, {0, 0});
    }
    {
        // A scalar broadcast input and a 3-d permuted input.
        luminal::Graph g;
        GraphTensor s = g.tensor({1}), t = g.tensor({4, 5, 6});
        GraphTensor r = (t.permute({2, 0, 1}) * s.expand({6}).expand_dim(1, 4).expand_dim(2, 5) + 2.0).log2().output();
        check_fused("scalar broadcast, permuted 3-d", g, r, {{s, cpu_test::uniform(1, 2)}, {t, cpu_test::uniform(0, 5)}}, 3,
                    {1e-5, 1e-5});
    }
}

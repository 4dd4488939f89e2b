// Every op against PyTorch: each case builds a luminal graph, binds the inputs
// recorded in tests/data/ops/op_fixtures.txt (tools/gen_op_fixtures.py), runs it
// on every runtime (the reference, the CPU backend and the test-only toy
// backend, each compiling with its own rules) and compares each output with
// torch's.
//
// Tolerances (|got - want| <= abs + rel * |want|): f32 results 1e-5 + 1e-5 rel
// unless a case says otherwise; integer, bool, cast and pure data-movement
// results are exact. NaN must be NaN and an infinity must be the same infinity.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <cmath>
#include <limits>
#include <luminal/luminal.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../cuda/nvrtc_coverage.hpp"
#include "../toy_backend/toy_runtime.hpp"
#include "fixture_reader.hpp"

// A namespace of its own: this file shares a translation unit with the CPU tests, whose helpers have the same names.
namespace op_fixtures {

using luminal::DType;
using luminal::Expression;
using luminal::GraphTensor;
using luminal_test::FixtureCase;
using luminal_test::FixtureTensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Tol {
    double abs = 1e-5;
    double rel = 1e-5;
};
constexpr Tol kExact{0, 0};
constexpr Tol kF16{1e-3, 2e-3};  // about two f16 ulps

const std::map<std::string, FixtureCase>& all_fixtures() {
    static const auto fixtures = luminal_test::read_fixtures((luminal_test::data_dir() / "ops" / "op_fixtures.txt").string());
    return fixtures;
}

DType dtype_of(const std::string& name) {
    for (DType t : luminal::all_dtypes)
        if (luminal::name_of(t) == name) return t;
    throw std::runtime_error("unknown dtype " + name);
}

// One fixture case: declare inputs, expect outputs, run (at one or several sizes).
class Case {
public:
    explicit Case(std::string name) : name_(std::move(name)) {
        auto it = all_fixtures().find(name_);
        REQUIRE_MESSAGE(it != all_fixtures().end(), "fixture case '" << name_ << "' missing; rerun tools/gen_op_fixtures.py");
        case_ = &it->second;
    }

    luminal::Graph cx;

    // An input with the fixture's shape and dtype.
    GraphTensor in(const std::string& role) {
        const FixtureTensor& t = tensor(role);
        luminal::Shape shape(t.dims.begin(), t.dims.end());
        return in(role, shape, dtype_of(t.dtype));
    }
    // An input with an explicit (possibly symbolic) shape; data comes from role.<size>.
    GraphTensor in(const std::string& role, const luminal::Shape& shape, DType dtype = DType::F32) {
        GraphTensor t = cx.named_tensor(role, shape, dtype);
        inputs_.emplace_back(t, role);
        return t;
    }

    template <typename E>
    void expect(const std::string& role, const E& expression, Tol tol = {}) {
        expected_.push_back({expression.output(), role, tol});
    }

    void run() { execute_all(""); }

    // Compiles once, then executes the same runtime with dim = each size.
    void run_sizes(char dim, std::initializer_list<std::int64_t> sizes) {
        for (std::int64_t s : sizes) {
            cx.set_dim(dim, s);
            std::string suffix(1, '.');  // (not "." + to_string: GCC 12 warns falsely there)
            suffix += std::to_string(s);
            execute_all(suffix);
        }
    }

private:
    struct Expected {
        GraphTensor tensor;
        std::string role;
        Tol tol;
    };

    const FixtureTensor& tensor(const std::string& role) const {
        auto it = case_->find(role);
        if (it == case_->end()) throw std::runtime_error("fixture case '" + name_ + "' has no tensor '" + role + "'");
        return it->second;
    }

    // Every runtime compiles the graph once (each with its own rules) and
    // must reproduce torch's values.
    void execute_all(const std::string& suffix) {
        if (!reference_) {
            reference_ = cx.compile(luminal::ReferenceRuntime{});
            cpu_ = cx.compile(luminal::CpuRuntime{});
            toy_ = cx.compile(toy::ToyRuntime{});
            cuda_ = cx.compile(luminal_test::CompilingEmulator{});
        }
        execute_on(*reference_, "reference", suffix);
        execute_on(*cpu_, "cpu", suffix);
        execute_on(*toy_, "toy", suffix);
        execute_on(*cuda_, "cuda (host emulator)", suffix);
    }

    template <typename Runtime>
    void execute_on(Runtime& rt, const char* runtime, const std::string& suffix) {
        for (auto& [t, role] : inputs_) {
            const FixtureTensor& data = tensor(role + suffix);
            if (data.is_float()) rt.set_data(t, std::vector<float>(data.floats.begin(), data.floats.end()));
            else rt.set_data(t, data.ints);
        }
        rt.execute(cx.dyn_map());
        for (const Expected& e : expected_) compare(rt, runtime, e, tensor(e.role + suffix), e.role + suffix);
    }

    template <typename Runtime>
    void compare(const Runtime& rt, const char* runtime, const Expected& e, const FixtureTensor& want, const std::string& role) {
        INFO("case " << name_ << ", output " << role << ", on the " << runtime << " runtime");
        CHECK(std::string(luminal::name_of(e.tensor.dtype())) == want.dtype);
        luminal::Shape shape = e.tensor.shape();
        std::vector<std::int64_t> dims;
        for (auto& d : shape) dims.push_back(d.eval(cx.dyn_map()));
        REQUIRE(dims == want.dims);

        std::ostringstream report;
        std::size_t bad = 0;
        if (want.is_float()) {
            std::vector<double> got = rt.template get<double>(e.tensor);
            REQUIRE(got.size() == want.floats.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                double g = got[i], w = want.floats[i];
                bool ok = std::isnan(w) ? std::isnan(g)
                          : std::isinf(w) ? g == w
                                          : std::abs(g - w) <= e.tol.abs + e.tol.rel * std::abs(w);
                if (!ok && bad++ < 6) report << "  [" << i << "] got " << g << " want " << w << "\n";
            }
        } else {
            std::vector<std::int64_t> got = rt.template get<std::int64_t>(e.tensor);
            REQUIRE(got.size() == want.ints.size());
            for (std::size_t i = 0; i < got.size(); ++i)
                if (got[i] != want.ints[i] && bad++ < 6)
                    report << "  [" << i << "] got " << got[i] << " want " << want.ints[i] << "\n";
        }
        CHECK_MESSAGE(bad == 0, bad << " mismatching elements:\n" << report.str());
    }

    std::string name_;
    const FixtureCase* case_ = nullptr;
    std::vector<std::pair<GraphTensor, std::string>> inputs_;
    std::vector<Expected> expected_;
    std::optional<luminal::ReferenceRuntime> reference_;
    std::optional<luminal::CpuRuntime> cpu_;
    std::optional<toy::ToyRuntime> toy_;
    std::optional<luminal_test::CompilingEmulator> cuda_;
};

using UnaryFn = GraphTensor (*)(const GraphTensor&);
using BinaryFn = GraphTensor (*)(const GraphTensor&, const GraphTensor&);

// x -> out for a single-input, single-output case.
void unary_case(const char* name, UnaryFn fn, Tol tol = {}) {
    Case c(name);
    c.expect("out", fn(c.in("x")), tol);
    c.run();
}

// a, b -> out.
void binary_case(const char* name, BinaryFn fn, Tol tol = {}) {
    Case c(name);
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("out", fn(a, b), tol);
    c.run();
}

// ---------------------------------------------------------------------------
// Elementwise

TEST_CASE("fixtures: file parses") {
    CHECK(all_fixtures().size() >= 100);
}

TEST_CASE("fixtures: unary ops (with inf / nan / 0 inputs)") {
    struct Entry {
        const char* name;
        UnaryFn fn;
        Tol tol;
    };
    const Entry table[] = {
        {"unary_neg", [](const GraphTensor& x) -> GraphTensor { return -x; }, kExact},
        {"unary_abs", [](const GraphTensor& x) -> GraphTensor { return x.abs(); }, kExact},
        {"unary_sign", [](const GraphTensor& x) -> GraphTensor { return x.sign(); }, kExact},
        {"unary_exp", [](const GraphTensor& x) -> GraphTensor { return x.exp(); }, {}},
        {"unary_exp2", [](const GraphTensor& x) -> GraphTensor { return x.exp2(); }, {}},
        {"unary_log", [](const GraphTensor& x) -> GraphTensor { return x.log(); }, {}},
        {"unary_log2", [](const GraphTensor& x) -> GraphTensor { return x.log2(); }, {}},
        {"unary_sin", [](const GraphTensor& x) -> GraphTensor { return x.sin(); }, {}},
        {"unary_cos", [](const GraphTensor& x) -> GraphTensor { return x.cos(); }, {}},
        {"unary_sqrt", [](const GraphTensor& x) -> GraphTensor { return x.sqrt(); }, {}},
        {"unary_rsqrt", [](const GraphTensor& x) -> GraphTensor { return x.rsqrt(); }, {}},
        {"unary_recip", [](const GraphTensor& x) -> GraphTensor { return x.recip(); }, {}},
        {"unary_square", [](const GraphTensor& x) -> GraphTensor { return x.square(); }, {}},
        {"unary_sigmoid", [](const GraphTensor& x) -> GraphTensor { return x.sigmoid(); }, {}},
        {"unary_tanh", [](const GraphTensor& x) -> GraphTensor { return x.tanh(); }, {}},
        {"unary_relu", [](const GraphTensor& x) -> GraphTensor { return x.relu(); }, kExact},
        // erf via A&S 7.1.26: |erf error| < 1.5e-7, so |gelu error| < 1e-6 for |x| <= 6.
        {"unary_gelu", [](const GraphTensor& x) -> GraphTensor { return x.gelu(); }, {1e-6, 1e-5}},
        {"unary_gelu_tanh", [](const GraphTensor& x) -> GraphTensor { return x.gelu_tanh(); }, {}},
        {"unary_silu", [](const GraphTensor& x) -> GraphTensor { return x.silu(); }, {}},
    };
    for (const Entry& e : table) {
        SUBCASE(e.name) { unary_case(e.name, e.fn, e.tol); }
    }
}

TEST_CASE("fixtures: f16 unary math rounds like torch") {
    Case c("unary_f16");
    GraphTensor x = c.in("x");
    c.expect("exp", x.exp(), kF16);
    c.expect("sqrt", x.sqrt(), kF16);
    c.expect("sigmoid", x.sigmoid(), kF16);
    c.run();
}

TEST_CASE("fixtures: + - * / with broadcasting") {
    Case c("binary_broadcast");
    GraphTensor a = c.in("a"), b = c.in("b");  // [3,1] and [1,4]
    c.expect("add", a + b);
    c.expect("sub", a - b);
    c.expect("mul", a * b);
    c.expect("div", a / b);
    c.run();
}

TEST_CASE("fixtures: broadcasting across ranks") {
    Case c("binary_broadcast_rank");
    GraphTensor a = c.in("a"), b = c.in("b"), bias = c.in("c");  // [2,3,4], [4], [3,1]
    c.expect("out", a * b + bias);
    c.run();
}

TEST_CASE("fixtures: scalar operands on either side") {
    Case c("binary_scalar");
    GraphTensor x = c.in("x");
    c.expect("add", x + 2);
    c.expect("rsub", 3 - x);
    c.expect("mul", x * -1.5);
    c.expect("rdiv", 2.0 / x);
    c.expect("div", x / 4);
    c.expect("sub", x - 0.25);
    c.run();
}

TEST_CASE("fixtures: inf and nan through + * /") {
    Case c("binary_special");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("add", a + b, kExact);
    c.expect("mul", a * b, kExact);
    c.expect("div", a / b, kExact);
    c.run();
}

TEST_CASE("fixtures: float floor modulo with negative operands") {
    Case c("mod_float");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("mod", a % b);
    c.expect("mod_s", a % 2.5);
    c.expect("mod_neg_s", a % -3.0);
    c.run();
}

TEST_CASE("fixtures: pow") {
    binary_case("pow_tensor", [](const GraphTensor& a, const GraphTensor& b) -> GraphTensor { return a.pow(b); },
                {1e-5, 1e-5});
    Case c("pow_scalar");
    GraphTensor x = c.in("x");
    GraphTensor xp = x.abs() + 0.5;
    c.expect("p2", x.pow(2));
    c.expect("p3", x.pow(3));
    c.expect("pm1", x.pow(-1));
    c.expect("p0", x.pow(0), kExact);
    c.expect("half", xp.pow(0.5));
    c.expect("p2_5", xp.pow(2.5));
    c.run();
}

TEST_CASE("fixtures: maximum, minimum, clamp") {
    Case c("max_min");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("max", a.maximum(b), kExact);
    c.expect("min", a.minimum(b), kExact);
    c.run();
    Case k("clamp");
    GraphTensor x = k.in("x");
    k.expect("out", x.clamp(-1.5, 2.0), kExact);
    k.expect("relu6", x.clamp(0, 6), kExact);
    k.run();
}

TEST_CASE("fixtures: maximum / minimum propagate nan from either side") {
    Case c("nan_maximum");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("max", a.maximum(b), kExact);
    c.expect("min", a.minimum(b), kExact);
    c.run();
}

TEST_CASE("fixtures: f32 comparisons with nan, inf and signed zero") {
    Case c("compare_f32");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("lt", a < b);
    c.expect("gt", a > b);
    c.expect("le", a <= b);
    c.expect("ge", a >= b);
    c.expect("eq", a.eq(b));
    c.expect("ne", a.ne(b));
    c.run();
}

TEST_CASE("fixtures: i32 comparisons with tensors and scalars") {
    Case c("compare_i32");
    GraphTensor x = c.in("x"), y = c.in("y");
    c.expect("lt", x < y);
    c.expect("ge", x >= y);
    c.expect("eq_s", x.eq(2));
    c.expect("ne_s", x.ne(0));
    c.expect("gt_s", x > -1);
    c.expect("le_s", x <= 1);
    c.run();
}

TEST_CASE("fixtures: bool logic") {
    Case c("logical_bool");
    GraphTensor p = c.in("p"), q = c.in("q");  // [3,4] and [4]
    c.expect("and", p & q);
    c.expect("or", p | q);
    c.expect("not", !p);
    c.expect("xor", p.ne(q));
    c.expect("sum", p.sum(1));  // bool sums are i64
    c.expect("any", p.max(1));
    c.expect("all", p.min(1));
    c.run();
}

TEST_CASE("fixtures: logical ops on numeric tensors") {
    Case c("logical_numeric");
    GraphTensor x = c.in("x"), y = c.in("y");
    c.expect("and", x.logical_and(y));
    c.expect("or", x.logical_or(y));
    c.expect("not_x", !x);
    c.expect("not_y", !y);
    c.run();
}

TEST_CASE("fixtures: where is exact (inf / nan branches do not leak)") {
    Case c("where_special");
    GraphTensor cond = c.in("c"), a = c.in("a"), b = c.in("b");
    c.expect("out", luminal::where(cond, a, b), kExact);
    c.expect("neg_inf", luminal::where(cond, a, -kInf), kExact);
    c.run();
}

TEST_CASE("fixtures: where with broadcasting and scalar branches") {
    Case c("where_broadcast");
    GraphTensor cond = c.in("c"), a = c.in("a"), b = c.in("b");  // [3,1], [1,4], [3,4]
    c.expect("out", luminal::where(cond, a, b), kExact);
    c.expect("scalar", luminal::where(cond, 0.5, b), kExact);
    c.expect("scalars", luminal::where(cond, 1.0, -1.0), kExact);
    c.run();
}

TEST_CASE("fixtures: where(mask, x, -inf) feeding softmax") {
    Case c("where_mask_softmax");
    GraphTensor x = c.in("x"), mask = c.in("mask");
    c.expect("out", luminal::where(mask, x, -kInf).softmax(-1));
    c.run();
}

// ---------------------------------------------------------------------------
// Integer, bool, f16 and bf16 arithmetic

TEST_CASE("fixtures: i32 arithmetic") {
    Case c("int_arith");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("add", a + b);
    c.expect("sub", a - b);
    c.expect("mul", a * b);
    c.expect("mod", a % b);
    c.expect("mod_s", a % 7);
    c.expect("mod_neg_s", a % -4);
    c.expect("add_s", a + 3);
    c.expect("mul_s", a * -2);
    c.expect("div", a / b);  // true division: f32
    c.expect("add_f", a + 0.5);
    c.run();
}

TEST_CASE("fixtures: unary ops on i32 keep or promote the dtype like torch") {
    Case c("int_unary");
    GraphTensor x = c.in("x");
    c.expect("abs", x.abs());
    c.expect("sign", x.sign());
    c.expect("neg", -x);
    c.expect("square", x.square());
    c.expect("relu", x.relu());
    c.expect("clamp", x.clamp(0, 6));
    c.expect("clamp_f", x.clamp(-1.5, 2.0), kExact);
    c.expect("exp", x.exp());
    c.expect("sqrt", x.sqrt());
    c.expect("pow2", x.pow(2));
    c.expect("pow_half", x.pow(0.5));
    c.run();
    Case w("where_int");
    GraphTensor cond = w.in("c"), y = w.in("x"), l = w.in("l");
    w.expect("tensors", luminal::where(cond, y, l));
    w.expect("scalar", luminal::where(cond, y, 2));
    w.run();
}

TEST_CASE("fixtures: integer wrap-around (i32, u8)") {
    Case c("int_wrap");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("add", a + b);
    c.expect("mul", a * b);
    c.run();
    Case u("u8_arith");
    GraphTensor x = u.in("a"), y = u.in("b");
    u.expect("add", x + y);
    u.expect("mul", x * y);
    u.run();
}

TEST_CASE("fixtures: u8 reductions, integer division by zero") {
    Case c("u8_reduce");
    GraphTensor x = c.in("x");
    c.expect("min1", x.min(1));
    c.expect("max0", x.max(0));
    c.expect("sum1", x.sum(1));
    c.run();
    Case d("int_div_zero");
    GraphTensor a = d.in("a"), b = d.in("b");
    d.expect("div", a / b, kExact);
    d.run();
}

TEST_CASE("fixtures: i64 arithmetic") {
    Case c("i64_arith");
    GraphTensor a = c.in("a"), b = c.in("b");
    c.expect("add", a + b);
    c.expect("mul", a * b);
    c.expect("mod", a % b);
    c.expect("sum", a.sum(0, true));
    c.run();
}

TEST_CASE("fixtures: dtype promotion between tensors") {
    Case c("promotion");
    GraphTensor i = c.in("i"), f = c.in("f"), l = c.in("l"), h = c.in("h"), bo = c.in("bo");
    c.expect("i_f", i + f);
    c.expect("i_l", i + l);
    c.expect("h_f", h * f);
    c.expect("bo_i", bo + i);
    c.expect("h_i", h - i, kExact);
    c.run();
}

TEST_CASE("fixtures: f16 and bf16 arithmetic rounds to the dtype") {
    Case c("f16_bf16_arith");
    GraphTensor h1 = c.in("h1"), h2 = c.in("h2"), b1 = c.in("b1"), b2 = c.in("b2");
    c.expect("h_add", h1 + h2, kExact);
    c.expect("h_mul", h1 * h2, kExact);
    c.expect("b_add", b1 + b2, kExact);
    c.expect("b_mul", b1 * b2, kExact);
    c.expect("h_sum", h1.sum(0), kF16);
    c.run();
}

// ---------------------------------------------------------------------------
// Reductions and normalisations

TEST_CASE("fixtures: sum over one, several and all axes") {
    Case c("reduce_sum");
    GraphTensor x = c.in("x");  // [2,3,4]
    c.expect("s1", x.sum(1));
    c.expect("s02k", x.sum({0, 2}, true));
    c.expect("s_last_k", x.sum(-1, true));
    c.expect("all", x.sum({0, 1, 2}));
    c.run();
}

TEST_CASE("fixtures: max / min with -inf, keepdim and several axes") {
    Case c("reduce_max_min");
    GraphTensor x = c.in("x");
    c.expect("max1", x.max(1), kExact);
    c.expect("min0k", x.min(0, true), kExact);
    c.expect("max01", x.max({0, 1}), kExact);
    c.expect("min1k", x.min(1, true), kExact);
    c.run();
}

TEST_CASE("fixtures: max / min propagate nan") {
    Case c("reduce_max_nan");
    GraphTensor x = c.in("x");
    c.expect("max", x.max(1), kExact);
    c.expect("min", x.min(1), kExact);
    c.run();
}

TEST_CASE("fixtures: mean, var, std") {
    Case c("reduce_mean_var");
    GraphTensor x = c.in("x");  // [3,4,5]
    c.expect("mean2", x.mean(2));
    c.expect("mean01k", x.mean({0, 1}, true));
    c.expect("var1", x.var({1}));
    c.expect("var2_c0k", x.var({2}, 0, true));
    c.expect("std02", x.std({0, 2}));
    c.expect("std1_c0", x.std({1}, 0));
    c.run();
}

TEST_CASE("fixtures: argmax / argmin take the first of ties") {
    for (const char* name : {"argmax_ties", "argmax_int"}) {
        CAPTURE(name);
        Case c(name);
        GraphTensor x = c.in("x");
        c.expect("amax1", x.argmax(1));
        if (std::string(name) == "argmax_ties") {
            c.expect("amin1", x.argmin(1));
            c.expect("amax0k", x.argmax(0, true));
        }
        c.expect("amin0", x.argmin(0));
        c.run();
    }
}

TEST_CASE("fixtures: argmax / argmin treat nan as the extreme") {
    Case c("nan_argmax");
    GraphTensor x = c.in("x");
    c.expect("amax1", x.argmax(1));
    c.expect("amin1", x.argmin(1));
    c.run();
}

TEST_CASE("fixtures: logsumexp (incl. an all -inf row)") {
    Case c("logsumexp");
    GraphTensor x = c.in("x");
    c.expect("lse1", x.logsumexp({1}));
    c.expect("lse0k", x.logsumexp({0}, true));
    c.run();
    Case m("logsumexp_multi");
    m.expect("lse12", m.in("x").logsumexp({1, 2}));
    m.run();
}

TEST_CASE("fixtures: integer reductions") {
    Case c("int_reduce");
    GraphTensor x = c.in("x");
    c.expect("sum1", x.sum(1));  // i64
    c.expect("max0", x.max(0));  // i32
    c.expect("min1", x.min(1));
    c.expect("sum_all", x.sum({0, 1}));
    c.expect("mean1", x.mean(1));  // f32
    c.run();
}

TEST_CASE("fixtures: softmax and log_softmax") {
    Case c("softmax");
    GraphTensor x = c.in("x");
    c.expect("sm1", x.softmax(1));
    c.expect("sm0", x.softmax(0));
    c.expect("lsm1", x.log_softmax(1));
    c.expect("lsm0", x.log_softmax(0));
    c.run();
}

TEST_CASE("fixtures: layer_norm and rms_norm") {
    Case c("layer_norm");
    GraphTensor x = c.in("x");  // [2,3,8]
    c.expect("ln_last", x.layer_norm({-1}, 1e-5));
    c.expect("ln_two", x.layer_norm({1, 2}, 1e-3));
    c.run();
    Case r("rms_norm");
    GraphTensor y = r.in("x");
    r.expect("rms_last", y.rms_norm({1}, 1e-6));
    r.expect("rms_all", y.rms_norm({0, 1}, 1e-5));
    r.run();
}

// ---------------------------------------------------------------------------
// matmul

TEST_CASE("fixtures: matmul shapes") {
    for (const char* name : {"matmul_1d_1d", "matmul_1d_2d", "matmul_2d_1d", "matmul_2d_2d", "matmul_3d_batched",
                             "matmul_3d_2d", "matmul_4d_broadcast", "matmul_1d_3d", "matmul_large", "matmul_int"}) {
        SUBCASE(name) {
            binary_case(name, [](const GraphTensor& a, const GraphTensor& b) -> GraphTensor { return a.matmul(b); });
        }
    }
}

TEST_CASE("fixtures: f16 / bf16 matmul and softmax") {
    Case c("matmul_half");
    GraphTensor h1 = c.in("h1"), h2 = c.in("h2"), b1 = c.in("b1"), b2 = c.in("b2");
    c.expect("h", h1.matmul(h2), kF16);
    c.expect("b", b1.matmul(b2), {1e-2, 1.6e-2});  // about two bf16 ulps
    c.expect("h_softmax", h1.softmax(1), kF16);
    c.run();
}

TEST_CASE("fixtures: matmul of permuted / transposed views") {
    Case c("permute_matmul");
    GraphTensor a = c.in("a"), b = c.in("b");  // [4,2,3], [5,3]
    c.expect("out", a.permute({1, 0, 2}).matmul(b.t()));
    c.run();
    binary_case("transpose_matmul",
                [](const GraphTensor& a, const GraphTensor& b) -> GraphTensor { return a.transpose(1, 2).matmul(b); });
}

// ---------------------------------------------------------------------------
// Movement feeding compute

TEST_CASE("fixtures: slice -> reduce") {
    Case c("slice_reduce");
    GraphTensor x = c.in("x");  // [4,7]
    c.expect("sum", x.slice({{1, 3}, {2, 6}}).sum(1));
    c.expect("max", x.slice_along(1, 3, 5).max(0), kExact);
    c.expect("mean", x.slice({{2, 4}, {1, 7}}).mean({0, 1}));
    c.run();
}

TEST_CASE("fixtures: pad -> add, pad with values") {
    Case c("pad_add");
    GraphTensor x = c.in("x"), y = c.in("y");  // [2,3], [3,5]
    c.expect("out", x.pad({{1, 0}, {0, 2}}) + y);
    c.run();
    Case v("pad_value");
    GraphTensor z = v.in("x");
    GraphTensor padded = z.pad({{0, 2}, {1, 1}}, -7.5);
    v.expect("pad", padded, kExact);
    v.expect("pad_max", padded.max(1), kExact);
    v.expect("along", z.pad_along(1, 2, 0, 3.0), kExact);
    v.expect("neg_inf_lse", z.pad_along(1, 0, 3, -kInf).logsumexp({1}));
    v.run();
}

TEST_CASE("fixtures: permute -> contiguous, transpose -> reshape adding a unit axis") {
    Case c("transpose_reshape");
    GraphTensor x = c.in("x");  // [3,4]
    c.expect("perm", x.reshape({3, 2, 2}).permute({2, 0, 1}).contiguous(), kExact);
    c.expect("t_sum", x.t().reshape({4, 3, 1}).sum(2), kExact);
    c.run();
}

TEST_CASE("fixtures: reshapes a view cannot express copy first") {
    Case c("reshape_copy");
    GraphTensor x = c.in("x"), z = c.in("z");  // [3,4], [2,3,4]
    c.expect("t_reshape", x.t().reshape({2, 6}), kExact);
    c.expect("t_flat2", x.t().reshape({-1}) * 2, kExact);
    c.expect("slice_flat", x.slice_along(1, 1, 3).reshape({-1}), kExact);
    c.expect("pad_flat", x.pad_along(1, 1, 0).reshape({5, 3}), kExact);
    c.expect("perm_merge", z.permute({0, 2, 1}).merge_dims(0), kExact);
    c.expect("perm_flatten", z.permute({2, 1, 0}).flatten(1, 2), kExact);
    c.expect("perm_split", z.permute({2, 0, 1}).reshape({4, 2, 3, 1}).sum(3), kExact);
    c.run();
}

TEST_CASE("fixtures: reshape, split_dims, merge_dims, flatten, squeeze") {
    Case c("reshape_ops");
    GraphTensor x = c.in("x");  // [2,3,4]
    c.expect("reshape", x.reshape({4, -1}) + 1);
    c.expect("split", x.split_dims(2, 2).sum(3));
    c.expect("merge", x.merge_dims(0).max(0), kExact);
    c.expect("flatten", x.flatten(1, 2).sum(1));
    c.expect("flat_all", x.flatten() * 3);
    c.expect("unsq_sq", x.unsqueeze(1).squeeze(1).sum(2));
    c.run();
}

TEST_CASE("fixtures: expand and expand_dim") {
    Case c("expand_ops");
    GraphTensor x = c.in("x"), v = c.in("v");  // [3,1], [4]
    c.expect("expand", x.expand({3, 4}) * v);
    c.expect("expand_dim", v.expand_dim(0, 2) + c.cx.arange(2, DType::F32).unsqueeze(1));
    c.expect("lead", x.expand({2, 3, 5}).sum(0));
    c.run();
}

TEST_CASE("fixtures: broadcasting a padded row") {
    Case c("expand_padded");
    GraphTensor x = c.in("x"), y = c.in("y");  // [1,4], [3,4]
    GraphTensor zero_row = x.pad_along(0, 1, 0).slice_along(0, 0, 1);  // padding: not a plain view axis
    c.expect("out", y + x.expand({3, 4}) + zero_row.expand({3, 4}));
    c.run();
}

TEST_CASE("fixtures: concat and stack") {
    Case c("concat_stack");
    GraphTensor a = c.in("a"), b = c.in("b"), d = c.in("c");  // [2,3], [4,3], [2,2]
    c.expect("cat0", a.concat_along(b, 0), kExact);
    c.expect("cat1", a.concat_along(d, 1), kExact);
    c.expect("stack0", luminal::ops::stack({a, a * 2, a + 1}, 0));
    c.expect("stack2", luminal::ops::stack({a, d.slice_along(1, 0, 1).expand({2, 3})}, 2), kExact);
    c.run();
    Case m("concat_dtypes");
    m.expect("out", m.in("a").concat_along(m.in("b"), 1), kExact);  // i32 ++ f32 -> f32
    m.run();
}

TEST_CASE("fixtures: permute -> slice chain feeding compute") {
    Case c("slice_permute_chain");
    GraphTensor x = c.in("x");  // [3,4,5]
    GraphTensor y = x.permute({2, 0, 1}).slice_along(0, 1, 4).slice_along(2, 1, 3);
    c.expect("out", y * 2 + 1);
    c.expect("sum", y.sum(1));
    c.run();
}

// ---------------------------------------------------------------------------
// Indexing

TEST_CASE("fixtures: flat gather with repeated indexes") {
    Case c("gather_flat");
    GraphTensor data = c.in("data"), idx = c.in("idx"), sidx = c.in("sidx");
    c.expect("out", data.gather(idx), kExact);
    c.expect("sliced", data.slice_along(1, 1, 3).gather(sidx), kExact);  // flat index into the logical view
    c.run();
}

TEST_CASE("fixtures: gather_elements (torch.gather) along each axis") {
    Case c("gather_elements");
    GraphTensor data = c.in("data"), i0 = c.in("i0"), i1 = c.in("i1");
    c.expect("ax0", data.gather_elements(i0, 0), kExact);
    c.expect("ax1", data.gather_elements(i1, 1), kExact);
    c.run();
    Case t("gather_elements_transposed");
    GraphTensor d = t.in("data"), idx = t.in("idx");
    t.expect("out", d.t().gather_elements(idx, 1), kExact);
    t.run();
}

TEST_CASE("fixtures: index_select with repeated indexes") {
    Case c("index_select");
    GraphTensor data = c.in("data"), rows = c.in("rows"), cols = c.in("cols"), data3 = c.in("data3"), mid = c.in("mid");
    c.expect("ax0", data.index_select(0, rows), kExact);
    c.expect("ax1", data.index_select(1, cols), kExact);
    c.expect("mid1", data3.index_select(1, mid), kExact);
    c.run();
    Case e("embedding_int");
    e.expect("out", e.in("table").index_select(0, e.in("ids")));
    e.run();
}

TEST_CASE("fixtures: flat scatter, repeated indexes: last write wins") {
    Case c("scatter_flat");
    GraphTensor dest = c.in("dest"), idx = c.in("idx"), src = c.in("src");
    c.expect("out", dest.scatter(idx, src), kExact);
    c.expect("const", dest.scatter(idx, c.cx.constant(7.0)), kExact);
    c.expect("dest_t", dest.t().scatter(idx, src), kExact);
    c.run();
}

TEST_CASE("fixtures: scatter_elements (torch.Tensor.scatter), repeated indexes: last write wins") {
    Case c("scatter_elements");
    GraphTensor dest = c.in("dest"), i1 = c.in("i1"), src = c.in("src"), i0 = c.in("i0"), src0 = c.in("src0");
    c.expect("ax1", dest.scatter_elements(1, i1, src), kExact);
    c.expect("ax0", dest.scatter_elements(0, i0, src0), kExact);
    c.expect("scalar", dest.scatter_elements(1, i1, c.cx.constant(-2.5)), kExact);
    c.run();
}

TEST_CASE("fixtures: argsort is stable (ties keep their order)") {
    Case c("argsort_ties");
    GraphTensor x = c.in("x");
    c.expect("asc", x.argsort(1));
    c.expect("desc", x.argsort(1, true));
    c.expect("asc0", x.argsort(0));
    c.expect("desc0", x.argsort(0, true));
    c.run();
    for (const char* name : {"argsort_int", "argsort_random"}) {
        CAPTURE(name);
        Case r(name);
        GraphTensor y = r.in("x");
        r.expect("asc", y.argsort(1));
        if (std::string(name) == "argsort_int") r.expect("desc", y.argsort(-1, true));
        else r.expect("desc0", y.argsort(0, true));
        r.run();
    }
}

TEST_CASE("fixtures: argsort puts nan last (largest)") {
    Case c("nan_argsort");
    GraphTensor x = c.in("x");
    c.expect("asc", x.argsort(1));
    c.expect("desc", x.argsort(1, true));
    c.run();
}

TEST_CASE("fixtures: topk, ties take the lower index first") {
    Case c("topk_ties");
    GraphTensor x = c.in("x");
    c.expect("idx", x.topk_indexes(3, 1));
    c.expect("vals", x.topk(3, 1), kExact);
    c.expect("idx0", x.topk_indexes(1, 0));
    c.expect("vals0", x.topk(1, 0), kExact);
    c.run();
    Case r("topk_random");
    GraphTensor y = r.in("x");
    r.expect("idx", y.topk_indexes(4, 1));
    r.expect("vals", y.topk(4, 1), kExact);
    r.run();
}

TEST_CASE("fixtures: cumsum (f32 with inf, i32 and bool accumulate in i64)") {
    Case c("cumsum");
    GraphTensor x = c.in("x");
    c.expect("c1", x.cumsum(1));
    c.expect("c0", x.cumsum(0));
    c.run();
    Case i("cumsum_int");
    GraphTensor y = i.in("x"), p = i.in("p");
    i.expect("c1", y.cumsum(1));
    i.expect("cb", p.cumsum(0));
    i.run();
}

TEST_CASE("fixtures: one_hot, tril, triu") {
    Case c("one_hot");
    c.expect("out", c.in("idx").one_hot(5));
    c.run();
    Case t("tril_triu");
    GraphTensor x = t.in("x");  // [2,3,4]
    t.expect("tril", x.tril(), kExact);
    t.expect("tril1", x.tril(1), kExact);
    t.expect("trilm1", x.tril(-1), kExact);
    t.expect("triu", x.triu(), kExact);
    t.expect("triu1", x.triu(1), kExact);
    t.expect("triu_m2", x.triu(-2), kExact);
    t.run();
}

// ---------------------------------------------------------------------------
// Creation and casts

TEST_CASE("fixtures: arange, arange_options, iota, zeros_like / ones_like") {
    Case a("arange");
    a.expect("out", a.cx.arange(7));
    a.expect("f32", a.cx.arange(5, DType::F32) * 0.5, kExact);
    a.run();
    Case o("arange_options");
    o.expect("f_half", o.cx.arange_options(0.5, 3.0, 0.25));
    o.expect("f_neg", o.cx.arange_options(5.0, -5.0, -1.5));
    o.expect("f_frac", o.cx.arange_options(0.1, 1.0, 0.3), {1e-7, 1e-7});
    o.expect("i32", o.cx.arange_options(2, 20, 3, DType::I32));
    o.expect("i64_neg", o.cx.arange_options(10, 0, -3, DType::I64));
    o.run();
    Case i("iota");
    Expression z = Expression::index();
    i.expect("out", i.cx.iota(z / 3 * 10 + z % 3, {4, 3}));
    i.expect("mod", i.cx.iota(z % 5, {12}));
    i.run();
    Case l("zeros_ones_like");
    GraphTensor x = l.in("x");
    l.expect("out", x + luminal::ops::ones_like(x) * 2 + luminal::ops::zeros_like(x), kExact);
    l.run();
}

TEST_CASE("fixtures: float -> int casts truncate toward zero") {
    Case c("cast_f32_int");
    GraphTensor x = c.in("x");
    c.expect("i32", x.cast(DType::I32));
    c.expect("i64", x.cast(DType::I64));
    c.run();
    Case u("cast_f32_u8");
    u.expect("u8", u.in("x").cast(DType::U8));
    u.run();
    Case b("cast_f32_bool");
    b.expect("bool", b.in("x").cast(DType::Bool));
    b.expect("i32_bool", b.in("i").cast(DType::Bool));
    b.run();
}

TEST_CASE("fixtures: f16 / bf16 casts round to nearest even") {
    Case h("cast_f16");
    GraphTensor x = h.in("x");
    h.expect("f16", x.cast(DType::F16), kExact);
    h.expect("round_trip", x.cast(DType::F16).cast(DType::F32), kExact);
    h.run();
    Case b("cast_bf16");
    GraphTensor y = b.in("x");
    b.expect("bf16", y.cast(DType::BF16), kExact);
    b.expect("f16_to_bf16", y.cast(DType::F16).cast(DType::BF16), kExact);
    b.run();
    Case f("cast_from_f16");
    GraphTensor z = f.in("h");
    f.expect("f32", z.cast(DType::F32), kExact);
    f.expect("i32", z.cast(DType::I32));
    f.expect("bf16", z.cast(DType::BF16), kExact);
    f.run();
}

TEST_CASE("fixtures: integer and bool casts wrap like torch") {
    Case c("cast_ints");
    GraphTensor l = c.in("l"), i = c.in("i"), b = c.in("b"), u = c.in("u");
    c.expect("l_i32", l.cast(DType::I32));
    c.expect("i_u8", i.cast(DType::U8));
    c.expect("i_f16", i.cast(DType::F16), kExact);
    c.expect("i_f32", i.cast(DType::F32), kExact);
    c.expect("i_i64", i.cast(DType::I64));
    c.expect("b_f32", b.cast(DType::F32), kExact);
    c.expect("b_i32", b.cast(DType::I32));
    c.expect("u_i32", u.cast(DType::I32));
    c.expect("u_f32", u.cast(DType::F32), kExact);
    c.run();
}

// ---------------------------------------------------------------------------
// Symbolic dimensions: one compiled runtime executed at s = 3 and s = 5.

TEST_CASE("fixtures: symbolic elementwise + reduce") {
    Case c("sym_ew_reduce");
    GraphTensor x = c.in("x", {'s', 4});
    GraphTensor centered = x - x.mean(0, true);
    c.expect("out", (centered * centered).sum(0));
    c.expect("ew", (x * 0.5).exp() + 1);
    c.expect("rowmax", x.max(1), kExact);
    c.expect("var", x.var({0}));
    c.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic reshape, split and transpose -> reshape") {
    Case c("sym_reshape");
    GraphTensor x = c.in("x", {'s', 4});
    c.expect("flat", x.reshape({-1}) * 2, kExact);
    c.expect("split", x.split_dims(1, 2).sum(2));
    c.expect("t_flat", x.t().reshape({-1}), kExact);
    c.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic embedding lookup and one_hot") {
    Case c("sym_embedding");
    GraphTensor table = c.in("table", {6, 3}), ids = c.in("ids", {'s'}, DType::I32);
    c.expect("out", table.index_select(0, ids), kExact);
    c.expect("onehot", ids.one_hot(6));
    c.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic matmul batch and inner dimension") {
    Case c("sym_matmul_batch");
    GraphTensor a = c.in("a", {'s', 3, 4}), b = c.in("b", {4, 2});
    c.expect("out", a.matmul(b));
    c.run_sizes('s', {3, 5});
    Case k("sym_matmul_inner");
    GraphTensor x = k.in("a", {2, 's'}), y = k.in("b", {'s', 3});
    k.expect("out", x.matmul(y));
    k.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic causal softmax") {
    Case c("sym_causal_softmax");
    GraphTensor x = c.in("x", {'s', 's'});
    Expression z = Expression::index();
    GraphTensor keep = c.cx.iota(le(z % 's', z / 's'), {'s', 's'}).cast(DType::Bool);
    c.expect("out", luminal::where(keep, x, -kInf).softmax(-1));
    c.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic concat, slice and pad") {
    Case c("sym_concat_slice");
    GraphTensor a = c.in("a", {'s', 2}), b = c.in("b", {2, 2});
    GraphTensor cat = a.concat_along(b, 0);
    c.expect("cat", cat, kExact);
    c.expect("tail", cat.slice_along(0, 1, cat.dim(0)).sum(0));
    c.expect("pad", a.pad({{1, 1}}), kExact);
    c.run_sizes('s', {3, 5});
}

TEST_CASE("fixtures: symbolic arange, cumsum, argsort") {
    Case c("sym_arange_scale");
    GraphTensor x = c.in("x", {'s'});
    c.expect("out", x * c.cx.arange('s', DType::F32));
    c.expect("cum", x.cumsum(0));
    c.expect("argsort", x.argsort(0));
    c.run_sizes('s', {3, 5});
}

}  // namespace op_fixtures

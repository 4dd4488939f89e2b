// CpuRuntime on the programs the compiler actually produces: for model-shaped
// graphs, candidate programs drawn from the e-graph saturated with
// CpuRuntime::Rules (Matmul and fused regions in many combinations) run on
// CpuRuntime and on ReferenceRuntime, the same program with the same inputs;
// and Graph::compile with a profiled search on CpuRuntime.
//
// Tolerance: 2e-5 * (1 + |want|) for f32 (CpuRuntime's GEMM and reductions
// accumulate in float, the reference in double); f16 as in cpu_test_support.
#include <doctest/doctest.h>

#include <cmath>
#include <luminal/luminal.hpp>
#include <optional>

#include "cpu_test_support.hpp"

using luminal::DType;
using luminal::Expression;
using luminal::GraphTensor;
namespace egraph = luminal::egraph;

namespace {

// The same random inputs on both runtimes; integers lie in [0, int_bound).
void bind_both(luminal::CpuRuntime& cpu, luminal::ReferenceRuntime& ref, const luminal::Graph& g, std::int64_t int_bound) {
    std::mt19937_64 rng(11);
    for (luminal::NodeId id = 0; id < g.size(); ++id) {
        const luminal::Node& n = g.node(id);
        if (n.op.kind != luminal::OpKind::Input) continue;
        GraphTensor t(const_cast<luminal::Graph*>(&g), id, luminal::ShapeTracker(n.shape), n.dtype);
        auto gen = luminal::is_float(n.dtype) ? cpu_test::uniform(-2, 2) : cpu_test::integers(0, int_bound - 1);
        std::vector<double> v = gen(static_cast<std::size_t>(cpu_test::numel(n.shape, g.dyn_map())), rng);
        cpu_test::bind_input(cpu, t, v);
        cpu_test::bind_input(ref, t, v);
    }
}

struct Tally {
    std::size_t candidates = 0, with_matmul = 0, with_fused = 0;
};

Tally check_candidates(luminal::Graph& g, const std::vector<GraphTensor>& outputs, std::size_t wanted,
                       std::int64_t int_bound = 4) {
    egraph::HlirEGraph h;
    egraph::build_egraph(g, h);
    egraph::saturate(h.graph, h.ctx, luminal::CpuRuntime::Rules{});
    egraph::CandidateGenerator generator(h, egraph::extract_min_cost(h.graph, h.ctx, luminal::costing_workloads({}, g.dyn_map()), luminal::CostModel{}, h.roots),
                                         5);
    std::vector<egraph::Choice> pool{generator.base()};
    std::mt19937_64 rng(2);
    luminal::CpuRuntime cpu;  // one runtime for every candidate, as the search uses it
    Tally tally;
    while (tally.candidates < wanted) {
        generator.set_base(pool[rng() % pool.size()]);
        auto candidate = generator.next();
        if (!candidate) break;
        luminal::Program p = egraph::lower(h.graph, h.ctx, *candidate, h.roots);
        bool matmul = false, fused = false;
        for (auto& n : p.nodes) {
            matmul |= n.spec.kind == luminal::op_symbol<luminal::MatmulOp>;
            fused |= n.spec.kind == luminal::op_symbol<luminal::FusedElementwiseOp>;
        }
        tally.with_matmul += matmul;
        tally.with_fused += fused;
        luminal::ReferenceRuntime ref;
        cpu.load(p);
        ref.load(p);
        bind_both(cpu, ref, g, int_bound);
        cpu.execute(g.dyn_map());
        ref.execute(g.dyn_map());
        INFO("candidate " << tally.candidates << ":\n" << p.to_string());
        for (std::size_t o = 0; o < outputs.size(); ++o) {
            cpu_test::Tol tol = outputs[o].dtype() == DType::F32 ? cpu_test::Tol{2e-5, 2e-5}
                                                                  : cpu_test::default_tol(outputs[o].dtype());
            cpu_test::compare(cpu, ref, outputs[o], tol, "output " + std::to_string(o));
        }
        pool.push_back(std::move(*candidate));
        ++tally.candidates;
    }
    return tally;
}

}  // namespace

TEST_CASE("cpu candidates: MLP (Matmul + fused activations)") {
    luminal::Graph g;
    auto x = g.named_tensor("x", {'s', 16});
    auto w1 = g.named_tensor("w1", {16, 32}), w2 = g.named_tensor("w2", {32, 8});
    auto b1 = g.named_tensor("b1", {32});
    g.set_dim('s', 3);
    std::vector<GraphTensor> outs{((x.matmul(w1) + b1).gelu_tanh().matmul(w2).silu() * 0.5).output()};
    Tally t = check_candidates(g, outs, 40);
    CHECK(t.candidates == 40);
    CHECK(t.with_matmul > 0);
    CHECK(t.with_fused > 0);
}

namespace {

// The program the CPU's rules and the cost model choose for g.
luminal::Program cost_model_choice(const luminal::Graph& g) {
    egraph::HlirEGraph h;
    egraph::build_egraph(g, h);
    egraph::saturate(h.graph, h.ctx, luminal::CpuRuntime::Rules{});
    return egraph::lower(
        h.graph, h.ctx, egraph::extract_min_cost(h.graph, h.ctx, luminal::costing_workloads({}, g.dyn_map()), luminal::CostModel{}, h.roots), h.roots);
}

}  // namespace

TEST_CASE("cpu candidates: a bf16 weight widened for its matmul is read as stored") {
    for (std::int64_t rows : {1, 12}) {
        CAPTURE(rows);
        luminal::Graph g;
        auto x = g.named_tensor("x", {'s', 40});
        auto w = g.named_tensor("w", {24, 40}, DType::BF16);
        g.set_dim('s', rows);
        std::vector<GraphTensor> outs{x.matmul(w.cast(DType::F32).t()).silu().output()};
        Tally t = check_candidates(g, outs, 20);
        CHECK(t.with_matmul > 0);

        // The cost model's choice: the Matmul reads the bf16 input, and no Cast is left.
        const luminal::Program p = cost_model_choice(g);
        INFO(p.to_string());
        bool narrow_matmul = false, cast = false;
        for (const auto& n : p.nodes) {
            cast |= n.spec.kind == luminal::symbol_of(luminal::OpKind::Cast);
            if (n.spec.kind == luminal::op_symbol<luminal::MatmulOp>)
                narrow_matmul |= p.nodes[n.sources[1]].spec.dtype == DType::BF16;
        }
        CHECK(narrow_matmul);
        CHECK_FALSE(cast);
    }
}

TEST_CASE("cpu candidates: bf16 activations times a bf16 weight, both widened for the matmul, are read as stored") {
    for (std::int64_t rows : {1, 12, 40}) {
        CAPTURE(rows);
        luminal::Graph g;
        auto x = g.named_tensor("x", {'s', 40}, DType::BF16);
        auto w = g.named_tensor("w", {24, 40}, DType::BF16);
        g.set_dim('s', rows);
        std::vector<GraphTensor> outs{x.cast(DType::F32).matmul(w.cast(DType::F32).t()).silu().output()};
        Tally t = check_candidates(g, outs, 20);
        CHECK(t.with_matmul > 0);

        const luminal::Program p = cost_model_choice(g);
        INFO(p.to_string());
        bool both_narrow = false, cast = false;
        for (const auto& n : p.nodes) {
            cast |= n.spec.kind == luminal::symbol_of(luminal::OpKind::Cast);
            if (n.spec.kind == luminal::op_symbol<luminal::MatmulOp>)
                both_narrow |= p.nodes[n.sources[0]].spec.dtype == DType::BF16 && p.nodes[n.sources[1]].spec.dtype == DType::BF16;
        }
        CHECK(both_narrow);
        CHECK_FALSE(cast);
    }
}

TEST_CASE("cpu candidates: causal attention") {
    luminal::Graph g;
    Expression s = 's', z = Expression::index();
    auto q = g.named_tensor("q", {2, s, 8}), k = g.named_tensor("k", {2, s, 8}), v = g.named_tensor("v", {2, s, 8});
    g.set_dim('s', 5);
    auto scores = q.matmul(k.transpose(1, 2)) * (1.0 / std::sqrt(8.0));
    auto future = g.iota(gt(z % s, z / s % s), {2, s, s}).cast(DType::Bool);
    std::vector<GraphTensor> outs{luminal::where(future, -INFINITY, scores).softmax(-1).matmul(v).output()};
    Tally t = check_candidates(g, outs, 40);
    CHECK(t.candidates == 40);
    CHECK(t.with_matmul > 0);
}

TEST_CASE("cpu candidates: norms, gather / scatter, top-k") {
    luminal::Graph g;
    auto x = g.named_tensor("x", {4, 12}), w = g.named_tensor("w", {12});
    auto table = g.named_tensor("table", {10, 6});
    auto ids = g.named_tensor("ids", {5}, DType::I32);
    auto cache = g.named_tensor("cache", {8, 6});
    auto positions = g.named_tensor("positions", {5, 6}, DType::I32);
    auto rows = table.index_select(0, ids);
    std::vector<GraphTensor> outs{
        (x.layer_norm({-1}) * w + 1.0).output(),
        (x.rms_norm({-1}) * (w + 1.0)).output(),
        cache.scatter_elements(0, positions, (rows - 1.0).sin()).output(),
        (x * 1.5 - 0.25).softmax(-1).topk_indexes(3, -1).output(),
    };
    Tally t = check_candidates(g, outs, 40);
    CHECK(t.candidates == 40);
    CHECK(t.with_fused > 0);
}

TEST_CASE("cpu candidates: f16 matmul and activations") {
    luminal::Graph g;
    auto x = g.named_tensor("x", {6, 16}, DType::F16), w = g.named_tensor("w", {16, 8}, DType::F16);
    std::vector<GraphTensor> outs{(x.matmul(w).silu() + 1.0).output()};
    Tally t = check_candidates(g, outs, 20);
    CHECK(t.candidates > 0);
}

TEST_CASE("cpu candidates: Graph::compile with a profiled search on CpuRuntime") {
    luminal::Graph g;
    auto x = g.named_tensor("x", {'s', 16});
    auto w = g.named_tensor("w", {16, 16});
    g.set_dim('s', 4);
    GraphTensor y = (x.matmul(w).softmax(-1) * x).sum(-1).output();
    luminal::CompileOptions options;
    options.search_candidates = 12;
    options.verbosity = 0;
    auto cpu = g.compile(luminal::CpuRuntime{}, options);
    luminal::ReferenceRuntime ref;
    ref.load(luminal::program_of(g));
    for (std::int64_t s : {4, 9}) {  // the compiled program runs at other sizes too
        g.set_dim('s', s);
        bind_both(cpu, ref, g, 4);
        cpu.execute(g.dyn_map());
        ref.execute(g.dyn_map());
        cpu_test::compare(cpu, ref, y, {2e-5, 2e-5}, "compiled program at s = " + std::to_string(s));
    }
}

TEST_CASE("cpu candidates: cached attention runs as one Attention kernel, matching the reference's direct softmax") {
    struct Case {
        std::int64_t heads, kv_heads, tokens, cached;
        DType cache;
        std::optional<std::int64_t> window;
    };
    // 70 tokens: three row blocks, the last partial; a window leaves rows' first keys masked too.
    for (const Case c : {Case{6, 2, 70, 9, DType::F16, {}}, Case{4, 4, 1, 40, DType::BF16, {}}, Case{4, 1, 33, 0, DType::F32, {}},
                         Case{2, 1, 5, 20, DType::F16, 8}}) {
        CAPTURE(c.heads);
        CAPTURE(c.kv_heads);
        CAPTURE(c.tokens);
        CAPTURE(c.cached);
        luminal::Graph g;
        constexpr std::int64_t head_dim = 16, capacity = 96;
        auto q = g.named_tensor("q", {Expression('s'), c.heads, head_dim});
        auto k = g.named_tensor("k", {Expression('s'), c.kv_heads, head_dim});
        auto v = g.named_tensor("v", {Expression('s'), c.kv_heads, head_dim});
        luminal::nn::CacheWindow window = luminal::nn::append_to_cache(g, "cache", capacity, k, v, Expression('p'), c.cache);
        luminal::nn::AttentionOptions options;
        options.scale = 0.25;
        options.sliding_window = c.window;
        GraphTensor out = luminal::nn::attention(q, window.keys, window.values, Expression('p'), options).output();
        g.set_dim('s', c.tokens);
        g.set_dim('p', c.cached);

        egraph::HlirEGraph h;
        egraph::build_egraph(g, h);
        egraph::saturate(h.graph, h.ctx, luminal::CpuRuntime::Rules{});
        const luminal::Program p = egraph::lower(
            h.graph, h.ctx, egraph::extract_min_cost(h.graph, h.ctx, luminal::costing_workloads({}, g.dyn_map()), luminal::CpuRuntime{}.cost_model(), h.roots),
            h.roots);
        INFO(p.to_string());
        std::size_t attention = 0;
        for (const auto& n : p.nodes) attention += n.spec.kind == luminal::op_symbol<luminal::AttentionOp>;
        CHECK(attention == 1);
        luminal::CpuRuntime cpu({.threads = 3});
        luminal::ReferenceRuntime ref;
        cpu.load(p);
        ref.load(luminal::program_of(g));  // the graph as recorded: matmuls, the masked softmax
        bind_both(cpu, ref, g, 4);
        cpu.execute(g.dyn_map());
        ref.execute(g.dyn_map());
        cpu_test::compare(cpu, ref, out, {2e-5, 2e-5}, "attention");
    }
}

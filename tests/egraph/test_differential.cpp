// Differential tests of the rewrite rules: for several model-shaped graphs, at
// least 200 distinct candidate programs drawn from the saturated e-graph (core
// + CPU rules) must compute what the unoptimised graph computes on the
// ReferenceRuntime, on random inputs.
//
// Tolerance: the rules never reassociate, so fused regions are bit-exact; a
// Matmul accumulates exact products in double where the primitive Mul rounded
// each product to f32 first, so results agree to ~1e-6 relative. We allow
// 2e-5 * (1 + |expected|).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include <luminal/luminal.hpp>

using namespace luminal;

namespace {

using CoreAndCpuRules = egraph::concat_t<egraph::CoreRules, egraph::CpuRules>;

struct Model {
    Graph graph;
    std::vector<GraphTensor> outputs;
};

// Random data for every input: floats in [-2, 2], integer inputs in [0, bound).
void bind_random(ReferenceRuntime& rt, const Graph& g, std::uint64_t seed, std::int64_t int_bound) {
    std::mt19937_64 rng(seed);
    for (NodeId id = 0; id < g.size(); ++id) {
        const Node& n = g.node(id);
        if (n.op.kind != OpKind::Input) continue;
        std::int64_t count = 1;
        for (auto& d : n.shape) count *= d.eval(g.dyn_map());
        GraphTensor t(const_cast<Graph*>(&g), id, ShapeTracker(n.shape), n.dtype);
        if (is_float(n.dtype)) {
            std::uniform_real_distribution<float> dist(-2, 2);
            std::vector<float> v(static_cast<std::size_t>(count));
            for (float& x : v) x = dist(rng);
            rt.set_data(t, v);
        } else {
            std::vector<std::int64_t> v(static_cast<std::size_t>(count));
            for (auto& x : v) x = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(int_bound));
            rt.set_data(t, v);
        }
    }
}

std::vector<std::vector<double>> run(const Graph& g, const Program& p, const std::vector<GraphTensor>& outputs,
                                     std::int64_t int_bound) {
    ReferenceRuntime rt;
    rt.load(p);
    bind_random(rt, g, 7, int_bound);
    rt.execute(g.dyn_map());
    std::vector<std::vector<double>> out;
    for (auto& o : outputs) out.push_back(rt.get<double>(o));
    return out;
}

// Returns how many distinct candidates were checked.
std::size_t check_candidates(Model& m, std::size_t wanted, std::int64_t int_bound = 4) {
    Program original = program_of(m.graph);
    auto expected = run(m.graph, original, m.outputs, int_bound);
    egraph::HlirEGraph h;
    egraph::build_egraph(m.graph, h);
    auto report = egraph::saturate(h.graph, h.ctx, CoreAndCpuRules{});
    INFO(report.to_string());
    REQUIRE(report.stop == egraph::StopReason::Saturated);
    egraph::CandidateGenerator generator(h, egraph::extract_min_cost(h.graph, h.ctx, egraph::costing_dims(m.graph.dyn_map())), 42);
    std::size_t checked = 0;
    std::vector<egraph::Choice> pool{generator.base()};
    std::mt19937_64 rng(1);
    while (checked < wanted) {
        const egraph::Choice& choice = pool[rng() % pool.size()];
        generator.set_base(choice);
        auto candidate = generator.next();
        if (!candidate) break;
        Program p = egraph::lower(h.graph, h.ctx, *candidate, h.roots);
        auto got = run(m.graph, p, m.outputs, int_bound);
        for (std::size_t o = 0; o < got.size(); ++o) {
            REQUIRE(got[o].size() == expected[o].size());
            for (std::size_t i = 0; i < got[o].size(); ++i) {
                double a = got[o][i], b = expected[o][i];
                bool ok = std::isnan(b) ? std::isnan(a) : std::abs(a - b) <= 2e-5 * (1 + std::abs(b));
                if (!ok) {
                    INFO("candidate " << checked << " output " << o << " element " << i << ": " << a << " vs " << b);
                    INFO(p.to_string());
                    REQUIRE(ok);
                }
            }
        }
        pool.push_back(std::move(*candidate));
        ++checked;
    }
    return checked;
}

}  // namespace

TEST_CASE("MLP candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto x = g.named_tensor("x", {'s', 16});
    auto w1 = g.named_tensor("w1", {16, 32}), w2 = g.named_tensor("w2", {32, 8});
    auto b1 = g.named_tensor("b1", {32});
    g.set_dim('s', 3);
    m.outputs.push_back(((x.matmul(w1) + b1).gelu_tanh().matmul(w2).silu() * 0.5).output());
    CHECK(check_candidates(m, 200) == 200);
}

TEST_CASE("causal attention candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    Expression s = 's', z = Expression::index();
    auto q = g.named_tensor("q", {2, s, 8}), k = g.named_tensor("k", {2, s, 8}), v = g.named_tensor("v", {2, s, 8});
    g.set_dim('s', 5);
    auto scores = q.matmul(k.transpose(1, 2)) * (1.0 / std::sqrt(8.0));
    auto future = g.iota(gt(z % s, z / s % s), {2, s, s}).cast(DType::Bool);
    m.outputs.push_back(where(future, -INFINITY, scores).softmax(-1).matmul(v).output());
    CHECK(check_candidates(m, 200) == 200);
}

TEST_CASE("layer norm and RMS norm candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto x = g.named_tensor("x", {4, 12});
    auto w = g.named_tensor("w", {12});
    m.outputs.push_back((x.layer_norm({-1}) * w + 1.0).output());
    m.outputs.push_back((x.rms_norm({-1}) * (w + 1.0)).output());
    CHECK(check_candidates(m, 200) == 200);
}

TEST_CASE("gather and scatter candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto table = g.named_tensor("table", {10, 6});
    auto ids = g.named_tensor("ids", {5}, DType::I32);
    auto rows = table.index_select(0, ids);
    auto cache = g.named_tensor("cache", {8, 6});
    auto positions = g.named_tensor("positions", {5, 6}, DType::I32);
    m.outputs.push_back((rows * 2.0 + 1.0).exp().output());
    m.outputs.push_back(cache.scatter_elements(0, positions, (rows - 1.0).sin()).output());
    CHECK(check_candidates(m, 200, 4) == 200);
}

TEST_CASE("top-k candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto logits = g.named_tensor("logits", {3, 9});
    auto scaled = (logits * 1.5 - 0.25).softmax(-1);
    m.outputs.push_back(scaled.topk_indexes(3, -1).output());
    m.outputs.push_back(scaled.topk(3, -1).output());
    CHECK(check_candidates(m, 200) == 200);
}

TEST_CASE("the candidate sequence is deterministic for a seed") {
    auto programs = [](std::uint64_t seed) {
        Graph g;
        auto x = g.tensor({4, 4});
        ((x * 2.0 + 1.0).exp().matmul(x) - x).output();
        egraph::HlirEGraph h;
        egraph::build_egraph(g, h);
        egraph::saturate(h.graph, h.ctx, CoreAndCpuRules{});
        egraph::CandidateGenerator generator(h, egraph::extract_min_cost(h.graph, h.ctx, egraph::costing_dims({})), seed);
        std::vector<std::string> texts;
        for (int i = 0; i < 20; ++i)
            if (auto c = generator.next()) texts.push_back(egraph::lower(h.graph, h.ctx, *c, h.roots).to_string());
        return texts;
    };
    CHECK(programs(3) == programs(3));
    CHECK(programs(3) != programs(4));
}

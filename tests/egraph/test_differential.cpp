// Differential tests of the rewrite rules: for several model-shaped graphs, at
// least 200 distinct candidate programs drawn from the saturated e-graph (core
// + CPU rules) must compute what the unoptimised graph computes on the
// ReferenceRuntime, on random inputs; and 50 drawn with the toy backend's
// rules must do so on the toy backend, 50 with the CUDA rules through the
// CUDA kernels (host emulator; each kernel also compiled with NVRTC).
//
// Tolerance: the rules never reassociate, so fused regions are bit-exact; a
// Matmul accumulates exact products in double where the primitive Mul rounded
// each product to f32 first, and the CUDA kernels accumulate reductions in
// f32, so results agree to ~1e-6 relative. We allow 2e-5 * (1 + |expected|).
#include <doctest/doctest.h>

#include <cmath>

#include <luminal/luminal.hpp>
#include <luminal/testing.hpp>

#include "../cuda/nvrtc_coverage.hpp"
#include "../toy_backend/toy_runtime.hpp"

using namespace luminal;

namespace {

// The oracle with the CPU's rules: candidates then hold Matmul and fused
// regions, run with those ops' reference semantics.
struct ReferenceWithCpuRules : ReferenceRuntime {
    using Rules = egraph::CpuRules;
};

struct Model {
    Graph graph;
};

// Checks `wanted` distinct candidates on the reference (CPU rules), and a
// quarter as many on the toy backend (its own rules and op) and through the
// CUDA backend's kernels (its rules, on the host emulator); returns how many
// the reference checked.
std::size_t check_candidates(Model& m, std::size_t wanted, std::int64_t int_bound = 4) {
    testing::CandidateOptions options;
    options.count = wanted;
    options.inputs.int_bound = int_bound;
    options.tolerance = {2e-5, 2e-5};
    const testing::Comparison cpu_rules = testing::check_random_candidates(m.graph, ReferenceWithCpuRules{}, options);
    CHECK_MESSAGE(cpu_rules.ok(), cpu_rules.report());
    options.count = wanted / 4;
    const testing::Comparison toy_rules = testing::check_random_candidates(m.graph, toy::ToyRuntime{}, options);
    CHECK_MESSAGE(toy_rules.ok(), toy_rules.report());
    CHECK(toy_rules.programs == options.count);
    const testing::Comparison cuda_rules = testing::check_random_candidates(m.graph, luminal_test::CompilingEmulator{}, options);
    CHECK_MESSAGE(cuda_rules.ok(), cuda_rules.report());
    CHECK(cuda_rules.programs == options.count);
    return cpu_rules.programs;
}

}  // namespace

TEST_CASE("MLP candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto x = g.named_tensor("x", {'s', 16});
    auto w1 = g.named_tensor("w1", {16, 32}), w2 = g.named_tensor("w2", {32, 8});
    auto b1 = g.named_tensor("b1", {32});
    g.set_dim('s', 3);
    ((x.matmul(w1) + b1).gelu_tanh().matmul(w2).silu() * 0.5).output();
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
    where(future, -INFINITY, scores).softmax(-1).matmul(v).output();
    CHECK(check_candidates(m, 200) == 200);
}

TEST_CASE("layer norm and RMS norm candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto x = g.named_tensor("x", {4, 12});
    auto w = g.named_tensor("w", {12});
    (x.layer_norm({-1}) * w + 1.0).output();
    (x.rms_norm({-1}) * (w + 1.0)).output();
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
    (rows * 2.0 + 1.0).exp().output();
    cache.scatter_elements(0, positions, (rows - 1.0).sin()).output();
    CHECK(check_candidates(m, 200, 4) == 200);
}

TEST_CASE("top-k candidates match the unoptimised graph") {
    Model m;
    Graph& g = m.graph;
    auto logits = g.named_tensor("logits", {3, 9});
    auto scaled = (logits * 1.5 - 0.25).softmax(-1);
    scaled.topk_indexes(3, -1).output();
    scaled.topk(3, -1).output();
    CHECK(check_candidates(m, 200) == 200);
}

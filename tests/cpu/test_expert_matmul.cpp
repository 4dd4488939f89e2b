// Mixture-of-experts products read in place: the graph nn::Experts writes
// (index_select of the stacked weights, then batched matmuls) runs as
// ExpertMatmul on the CPU, and equals a plain-loop evaluation of the routed
// SwiGLU mixture written here, over expert counts 1..8, top-k 1..8, 1..64
// tokens with repeated and unused experts, f32/f16/bf16 weights and 1 or 2
// threads. Weights are multiples of 1/64 (exact in every dtype), so the only
// difference is float summation order. Block-quantized experts are read as
// blocks (tests/quantized_experts.hpp).
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../quantized_experts.hpp"

namespace {

using luminal::DType;
using luminal::GraphTensor;

struct MoeShape {
    std::int64_t experts, top_k, hidden, inner;
};

std::vector<float> grid_values(std::size_t n, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> d(-64, 64);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(d(rng)) / 64.0f;
    return v;
}

// y[t] = sum_j weight[t, j] * down_e (silu(gate_e x_t) * up_e x_t), e = experts[t, j].
std::vector<double> routed_mixture(const MoeShape& s, std::int64_t tokens, const std::vector<float>& x,
                                   const std::vector<std::int32_t>& experts, const std::vector<float>& weights,
                                   const std::vector<float>& gate, const std::vector<float>& up,
                                   const std::vector<float>& down) {
    const std::int64_t h = s.hidden, i_dim = s.inner;
    std::vector<double> y(static_cast<std::size_t>(tokens * h), 0.0), act(static_cast<std::size_t>(i_dim));
    for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = 0; j < s.top_k; ++j) {
            const std::int64_t e = experts[t * s.top_k + j];
            for (std::int64_t o = 0; o < i_dim; ++o) {
                double g = 0, u = 0;
                for (std::int64_t q = 0; q < h; ++q) {
                    g += double(gate[(e * i_dim + o) * h + q]) * x[t * h + q];
                    u += double(up[(e * i_dim + o) * h + q]) * x[t * h + q];
                }
                act[o] = g / (1 + std::exp(-g)) * u;
            }
            for (std::int64_t o = 0; o < h; ++o) {
                double d = 0;
                for (std::int64_t q = 0; q < i_dim; ++q) d += double(down[(e * h + o) * i_dim + q]) * act[q];
                y[t * h + o] += weights[t * s.top_k + j] * d;
            }
        }
    return y;
}

struct MoeGraph {
    luminal::Graph cx;
    GraphTensor x, experts, weights, gate, up, down, y;
    MoeGraph(const MoeShape& s, DType dtype)
        : x(cx.tensor({'s', s.hidden})),
          experts(cx.tensor({'s', s.top_k}, DType::I32)),
          weights(cx.tensor({'s', s.top_k})),
          gate(cx.tensor({s.experts, s.inner, s.hidden}, dtype)),
          up(cx.tensor({s.experts, s.inner, s.hidden}, dtype)),
          down(cx.tensor({s.experts, s.hidden, s.inner}, dtype)),
          y(luminal::nn::Experts{gate, up, down}(x, {experts, weights}).output()) {
        cx.set_dim('s', 1);
    }
};

// Expert ids drawn from `pool` (some experts never chosen, others by many rows).
std::vector<std::int32_t> draw_experts(std::int64_t n, const std::vector<std::int32_t>& pool, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> d(0, pool.size() - 1);
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = pool[d(rng)];
    return v;
}

void check_mixture(const MoeShape& s, DType dtype, int threads) {
    CAPTURE(s.experts);
    CAPTURE(s.top_k);
    CAPTURE(luminal::name_of(dtype));
    CAPTURE(threads);
    MoeGraph g(s, dtype);
    luminal::CompileOptions options;
    options.verbosity = 0;
    options.workloads = {{luminal::DynMap{{'s', 1}}, 1}};
    auto [rt, report] = luminal::compile_with_report(g.cx, luminal::CpuRuntime(luminal::CpuOptions{static_cast<std::size_t>(threads)}), options);
    const std::string program = report.program.to_string();
    CHECK(program.find("ExpertMatmul") != std::string::npos);
    CHECK(program.find("Gather") == std::string::npos);  // no copy of any expert's weights

    std::mt19937_64 rng(static_cast<std::uint64_t>(s.experts * 131 + s.top_k * 17 + threads));
    const auto gate = grid_values(static_cast<std::size_t>(s.experts * s.inner * s.hidden), rng);
    const auto up = grid_values(gate.size(), rng);
    const auto down = grid_values(gate.size(), rng);
    rt.set_data(g.gate, gate);
    rt.set_data(g.up, up);
    rt.set_data(g.down, down);
    // Experts 1 and the last are never picked when there are more than two.
    std::vector<std::int32_t> pool;
    for (std::int32_t e = 0; e < s.experts; ++e)
        if (s.experts <= 2 || (e != 1 && e != s.experts - 1)) pool.push_back(e);
    for (std::int64_t tokens : {1, 5, 64}) {
        CAPTURE(tokens);
        const auto x = grid_values(static_cast<std::size_t>(tokens * s.hidden), rng);
        const auto experts = draw_experts(tokens * s.top_k, pool, rng);
        const auto weights = grid_values(experts.size(), rng);
        rt.set_data(g.x, x);
        rt.set_data(g.experts, experts);
        rt.set_data(g.weights, weights);
        rt.execute({{'s', tokens}});
        const auto got = rt.get_f32(g.y);
        const auto want = routed_mixture(s, tokens, x, experts, weights, gate, up, down);
        REQUIRE(got.size() == want.size());
        double worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(got[i] - want[i]) / (1 + std::abs(want[i])));
        CHECK(worst <= 1e-4);
    }
}

}  // namespace

TEST_CASE("block-quantized experts are read as their blocks and equal the dequantized experts' products") {
    luminal_test::QuantizedExperts experts;
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto [rt, report] = luminal::compile_with_report(experts.cx, luminal::CpuRuntime(luminal::CpuOptions{2}), options);
    experts.check_program(report.program.to_string());
    experts.run_and_check(rt);
}

TEST_CASE("the gated products of block-quantized experts, SiLU(gate x) * (up x), equal the dequantized experts'") {
    luminal_test::QuantizedGateUp experts;
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto rt = experts.cx.compile(luminal::CpuRuntime(luminal::CpuOptions{2}), options);
    experts.run_and_check(rt);
}

TEST_CASE("a mixture of experts reads the chosen experts in place and equals the routed mixture") {
    const MoeShape shapes[] = {{1, 1, 24, 20}, {3, 2, 40, 33}, {8, 8, 32, 72}, {8, 3, 64, 16}};
    for (const MoeShape& s : shapes)
        for (DType dtype : {DType::F32, DType::BF16, DType::F16}) check_mixture(s, dtype, dtype == DType::BF16 ? 2 : 1);
}

TEST_CASE("an expert index outside the stacked weights is an Error naming the row and the expert") {
    const MoeShape s{4, 2, 16, 8};
    MoeGraph g(s, DType::F32);
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto rt = g.cx.compile(luminal::CpuRuntime{}, options);
    std::mt19937_64 rng(7);
    for (GraphTensor w : {g.gate, g.up}) rt.set_data(w, grid_values(static_cast<std::size_t>(4 * 8 * 16), rng));
    rt.set_data(g.down, grid_values(static_cast<std::size_t>(4 * 16 * 8), rng));
    rt.set_data(g.x, grid_values(16, rng));
    rt.set_data(g.weights, std::vector<float>{0.5f, 0.5f});
    rt.set_data(g.experts, std::vector<std::int32_t>{2, 4});
    CHECK_THROWS_WITH_AS(rt.execute({{'s', 1}}), doctest::Contains("picks expert 4, outside [0, 4)"), luminal::Error);
}

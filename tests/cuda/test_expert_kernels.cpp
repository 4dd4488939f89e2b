// ExpertMatmul on CUDA: the mixture of experts nn::Experts writes runs as
// the expert GEMV (gate and up as one, SiLU(gate) * up in its epilogue), or
// for prefills the expert GEMM (no copy of any expert's weights), through its printed
// source on the host and the host emulator's interpretation, each against a
// plain-loop evaluation of the routed SwiGLU mixture written here: expert
// counts 1..8 and 128, top-k 1..8, 1..64 tokens with repeated and unused
// experts, f32/f16/bf16 weights, rows that stream as 16-byte vectors and rows
// that do not (K not a multiple of the vector width). Weights and inputs are
// multiples of 1/64, so the results differ only by float summation order.
// Block-quantized experts are read as blocks (tests/quantized_experts.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <luminal/cuda.hpp>
#include <luminal/cuda/sass_facts.hpp>
#include <luminal/luminal.hpp>
#include <random>
#include <string>
#include <vector>

#include "../quantized_experts.hpp"
#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

struct Mixture {
    std::int64_t experts, top_k, hidden, inner;
    DType dtype;
};

std::vector<float> grid_values(std::size_t n, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> d(-64, 64);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(d(rng)) / 64.0f;
    return v;
}

// out[t] = sum over j of p[t, j] * down_e (silu(gate_e x_t) * up_e x_t), e = picks[t, j], in double.
std::vector<double> mixture_by_loops(const Mixture& m, std::int64_t tokens, const std::vector<float>& x,
                                     const std::vector<std::int32_t>& picks, const std::vector<float>& p,
                                     const std::vector<float>& gate, const std::vector<float>& up,
                                     const std::vector<float>& down) {
    std::vector<double> out(static_cast<std::size_t>(tokens * m.hidden), 0.0), hidden(static_cast<std::size_t>(m.inner));
    for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = 0; j < m.top_k; ++j) {
            const std::int64_t e = picks[t * m.top_k + j];
            for (std::int64_t i = 0; i < m.inner; ++i) {
                double g = 0, u = 0;
                for (std::int64_t h = 0; h < m.hidden; ++h) {
                    g += double(gate[(e * m.inner + i) * m.hidden + h]) * x[t * m.hidden + h];
                    u += double(up[(e * m.inner + i) * m.hidden + h]) * x[t * m.hidden + h];
                }
                hidden[i] = g / (1 + std::exp(-g)) * u;
            }
            for (std::int64_t h = 0; h < m.hidden; ++h) {
                double d = 0;
                for (std::int64_t i = 0; i < m.inner; ++i) d += double(down[(e * m.hidden + h) * m.inner + i]) * hidden[i];
                out[t * m.hidden + h] += p[t * m.top_k + j] * d;
            }
        }
    return out;
}

struct MixtureTensors {
    GraphTensor x, picks, p, gate, up, down, out;
};

// Each mixture of `mixtures` over its own tokens' activations, in one graph (one program for the emulator).
struct MixtureGraph {
    Graph cx;
    std::vector<MixtureTensors> parts;
    explicit MixtureGraph(const std::vector<Mixture>& mixtures) {
        for (const Mixture& m : mixtures) {
            const GraphTensor x = cx.tensor({'s', m.hidden}), picks = cx.tensor({'s', m.top_k}, DType::I32),
                              p = cx.tensor({'s', m.top_k}), gate = cx.tensor({m.experts, m.inner, m.hidden}, m.dtype),
                              up = cx.tensor({m.experts, m.inner, m.hidden}, m.dtype),
                              down = cx.tensor({m.experts, m.hidden, m.inner}, m.dtype);
            const MixtureTensors t{x, picks, p, gate, up, down, nn::Experts{gate, up, down}(x, {picks, p}).output()};
            parts.push_back(t);
        }
        cx.set_dim('s', 1);
    }
};

// The nodes of the program whose op is `op` (ExpertMatmul or the expert GEMM), checking that no node gathers rows of
// stacked weights.
std::size_t expert_products(const Program& program, std::string_view op) {
    std::size_t count = 0;
    for (const ProgramNode& n : program.nodes) {
        if (n.spec.op.payload && n.spec.op.payload->name() == op) ++count;
        if (n.spec.kind == symbol_of(OpKind::Gather)) {
            CAPTURE(n.spec.shape.size());
            CHECK(n.spec.shape.size() != 3);
        }
    }
    return count;
}

// Picks drawn from `pool` (experts outside it never chosen, others by many rows).
std::vector<std::int32_t> draw_picks(std::int64_t n, const std::vector<std::int32_t>& pool, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> d(0, pool.size() - 1);
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = pool[d(rng)];
    return v;
}

// How a mixture's three products run: gate and up as one ExpertGateUp, down as an ExpertMatmul (decode) or, at these
// sizes of a prefill, as the expert GEMM.
struct ProductOps {
    std::string_view op;
    std::size_t per_mixture;
};
inline constexpr ProductOps kDecodeProducts[] = {{cuda::ExpertGateUpOp::name, 1}, {ExpertMatmulOp::name, 1}};
inline constexpr ProductOps kPrefillProducts[] = {{cuda::ExpertGateUpOp::name, 1}, {cuda::ExpertGemmOp::name, 1}};

// The mixtures compiled for steps of `planned_tokens` tokens, their products run as `ops` says.
template <typename Runtime>
void check_mixtures(const std::vector<Mixture>& mixtures, std::initializer_list<std::int64_t> token_counts,
                    std::int64_t planned_tokens = 1, std::span<const ProductOps> ops = kDecodeProducts) {
    MixtureGraph g(mixtures);
    CompileOptions options;
    options.verbosity = 0;
    options.workloads = {{DynMap{{'s', planned_tokens}}, 1}};
    auto [rt, report] = compile_with_report(g.cx, Runtime{}, options);
    for (const ProductOps& p : ops) {
        CAPTURE(p.op);
        CHECK(expert_products(report.program, p.op) == p.per_mixture * mixtures.size());
    }
    if constexpr (requires { rt.plan(); }) luminal_test::NvrtcCoverage::get().compile(rt.plan());
    std::mt19937_64 rng(static_cast<std::uint64_t>(mixtures[0].experts * 131 + mixtures[0].top_k * 17 + mixtures[0].hidden));
    std::vector<std::vector<float>> gates, ups, downs;
    for (std::size_t i = 0; i < mixtures.size(); ++i) {
        const Mixture& m = mixtures[i];
        gates.push_back(grid_values(static_cast<std::size_t>(m.experts * m.inner * m.hidden), rng));
        ups.push_back(grid_values(gates.back().size(), rng));
        downs.push_back(grid_values(gates.back().size(), rng));
        rt.set_data(g.parts[i].gate, gates[i]);
        rt.set_data(g.parts[i].up, ups[i]);
        rt.set_data(g.parts[i].down, downs[i]);
    }
    for (std::int64_t tokens : token_counts) {
        CAPTURE(tokens);
        std::vector<std::vector<float>> xs, ps;
        std::vector<std::vector<std::int32_t>> picks;
        for (std::size_t i = 0; i < mixtures.size(); ++i) {
            const Mixture& m = mixtures[i];
            // Experts 1 and the last are never picked when there are more than two.
            std::vector<std::int32_t> pool;
            for (std::int32_t e = 0; e < m.experts; ++e)
                if (m.experts <= 2 || (e != 1 && e != m.experts - 1)) pool.push_back(e);
            xs.push_back(grid_values(static_cast<std::size_t>(tokens * m.hidden), rng));
            picks.push_back(draw_picks(tokens * m.top_k, pool, rng));
            ps.push_back(grid_values(picks.back().size(), rng));
            rt.set_data(g.parts[i].x, xs[i]);
            rt.set_data(g.parts[i].picks, picks[i]);
            rt.set_data(g.parts[i].p, ps[i]);
        }
        rt.execute({{'s', tokens}});
        for (std::size_t i = 0; i < mixtures.size(); ++i) {
            const Mixture& m = mixtures[i];
            CAPTURE(m.experts);
            CAPTURE(m.top_k);
            CAPTURE(m.hidden);
            CAPTURE(name_of(m.dtype));
            const auto got = rt.get_f32(g.parts[i].out);
            const auto want = mixture_by_loops(m, tokens, xs[i], picks[i], ps[i], gates[i], ups[i], downs[i]);
            REQUIRE(got.size() == want.size());
            double worst = 0;
            for (std::size_t j = 0; j < got.size(); ++j) worst = std::max(worst, std::abs(got[j] - want[j]) / (1 + std::abs(want[j])));
            CHECK(worst <= 1e-4);
        }
    }
}

// An index outside [0, E) is an Error naming the row and the expert (interpreted) or the kernel's fault (printed).
template <typename Emulator>
void check_out_of_range(const char* message) {
    const Mixture m{4, 2, 8, 8, DType::BF16};
    MixtureGraph mixture({m});
    const MixtureTensors& g = mixture.parts[0];
    CompileOptions options;
    options.verbosity = 0;
    auto rt = mixture.cx.compile(Emulator{}, options);
    std::mt19937_64 rng(7);
    const auto gate = grid_values(static_cast<std::size_t>(m.experts * m.inner * m.hidden), rng);
    rt.set_data(g.gate, gate);
    rt.set_data(g.up, gate);
    rt.set_data(g.down, gate);
    rt.set_data(g.x, grid_values(static_cast<std::size_t>(m.hidden), rng));
    rt.set_data(g.p, grid_values(2, rng));
    for (const std::vector<std::int32_t>& picks : {std::vector<std::int32_t>{0, 4}, std::vector<std::int32_t>{-1, 2}}) {
        rt.set_data(g.picks, picks);
        CHECK_THROWS_WITH_AS(rt.execute({{'s', 1}}), doctest::Contains(message), Error);
    }
}

}  // namespace

TEST_CASE("the expert GEMV through its printed source: vector and element-wise rows, tiles over windows of rows, "
          "128 experts at top 8") {
    check_mixtures<luminal_test::PrintedSourceEmulator>(
        {// bf16 rows of 40 and 24 values stream as vectors. 9 tokens at top 8 put ~12 rows on each of 6 experts:
         // tiles of 8 carried across the printed blocks' 64-row windows.
         {8, 8, 40, 24, DType::BF16},
         // f16 rows of 36 and 20 values are not whole 16-byte vectors: read element by element.
         {5, 3, 36, 20, DType::F16},
         // Qwen3-30B-A3B's routing (128 experts, top 8) at small sizes, f32.
         {128, 8, 16, 8, DType::F32},
         // Rows of 1040 values: tiles of 7 rows.
         {3, 2, 1040, 8, DType::BF16}},
        {1, 9});
}

TEST_CASE("the expert GEMV on the host emulator: expert counts 1..8, top-k 1..8, f32/f16/bf16, its source compiles") {
    const DType dtypes[] = {DType::F32, DType::BF16, DType::F16};
    int i = 0;
    for (auto [experts, top_k] : {std::pair{1, 1}, {2, 2}, {3, 1}, {4, 3}, {5, 2}, {6, 6}, {7, 4}, {8, 8}, {8, 1}}) {
        const DType dtype = dtypes[i++ % 3];
        check_mixtures<luminal_test::CompilingEmulator>({{experts, top_k, 40, 24, dtype}, {experts, top_k, 36, 20, dtype}},
                                                        {1, 5, 64});
    }
    check_mixtures<luminal_test::CompilingEmulator>({{128, 8, 32, 16, DType::BF16}}, {1, 2});
}

// Prefill-sized steps: the down product as the expert GEMM on tensor cores (at these sizes the cost model keeps gate and
// up as one GEMV). 70 tokens at top 4 of 5 experts put ~56 rows on each expert (one tile of 64); 150 tokens put ~120
// (two tiles), as do 150 at top 2 of 4. Outputs past a block's 128 columns (N = 136, 264), K past a slice of 32 (40).
TEST_CASE("the expert GEMM (mma.sync, bf16 experts) through its printed source and on the host emulator: tiles of 64 rows") {
    const std::vector<Mixture> mixtures = {{5, 4, 136, 40, DType::BF16}, {4, 2, 264, 64, DType::BF16}};
    check_mixtures<luminal_test::PrintedSourceEmulator>(mixtures, {70, 150}, 128, kPrefillProducts);
    check_mixtures<luminal_test::CompilingEmulator>(mixtures, {1, 70, 150}, 128, kPrefillProducts);
}

// The expert GEMM's printed source on its own, over activations stored in bf16 (read as stored, one part) and in f32
// (three bf16 parts each, off the bf16 grid so every part counts), against the products by loops in double.
TEST_CASE("the expert GEMM's printed source over bf16 activations as stored and f32 ones in three parts") {
    const std::int64_t rows = 150, experts = 4, outputs = 136, depth = 72;
    std::mt19937_64 rng(11);
    const std::vector<float> w = grid_values(static_cast<std::size_t>(experts * outputs * depth), rng);
    const std::vector<std::int32_t> picks = draw_picks(rows, {0, 2, 3}, rng);
    std::vector<std::size_t> products;
    for (const DType activations : {DType::BF16, DType::F32}) {
        CAPTURE(name_of(activations));
        std::vector<float> x = grid_values(static_cast<std::size_t>(rows * depth), rng);
        if (activations == DType::F32)
            for (std::size_t i = 0; i < x.size(); ++i) x[i] += static_cast<float>(i % 7) * 0x1p-12f;
        const HostBuffer xs = host_buffer_from_values(activations, std::span<const float>(x)),
                         ws = host_buffer_from_values(DType::BF16, std::span<const float>(w)),
                         ps = host_buffer_from_values(DType::I32, std::span<const std::int32_t>(picks));
        const NodeSpec spec = NodeSpec::backend(cuda::ExpertGemmOp{cuda::gemm_parts(activations)},
                                                {ShapeTracker({rows, depth}), ShapeTracker({experts, outputs, depth}), ShapeTracker({rows})},
                                                {rows, outputs}, DType::F32);
        const DType dtypes[] = {activations, DType::BF16, DType::I32};
        const auto kernel = cuda::expert_gemm_kernel(spec, dtypes, 0);
        CHECK(kernel->parts() == (activations == DType::BF16 ? 1 : 3));
        CHECK(kernel->copies_activations() == (activations == DType::BF16));  // stored in order, rows of whole vectors
        HostBuffer out(DType::F32, static_cast<std::size_t>(rows * outputs));
        const HostBuffer* inputs[] = {&xs, &ws, &ps};
        luminal_test::PrintedSourceExecutor printed;
        printed.prepare({kernel->source()});
        printed.run(*kernel, cuda::KernelBuffers{inputs, out, DynMap{}});
        double worst = 0;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t o = 0; o < outputs; ++o) {
                double want = 0;
                for (std::int64_t i = 0; i < depth; ++i)
                    want += xs.as_double(static_cast<std::size_t>(r * depth + i)) * w[static_cast<std::size_t>((picks[r] * outputs + o) * depth + i)];
                worst = std::max(worst, std::abs(out.as_double(static_cast<std::size_t>(r * outputs + o)) - want) / (1 + std::abs(want)));
            }
        CHECK(worst <= 1e-5);
#ifdef LUMINAL_HAS_CUDA_TOOLKIT
        // The cost model prices a part's tensor-core products: the compiled code has one HMMA per part and tile.
        {
            REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
            const auto cubin = cuda::Nvrtc::get().compile(kernel->source(), 90, std::string(kernel->entry()));
            const auto facts = cuda::sass_facts(*cubin, std::string(kernel->entry()));
            REQUIRE(facts.has_value());
            products.push_back(static_cast<std::size_t>(facts->tensor_products));
            // The model prices a thread's weight copies of two slices in flight, as the compiled code has them, alone
            // and in a launch group beside another (a MoE layer's gate and up: loads into registers lost half of
            // theirs to the group's scheduling).
            CHECK(facts->main_loop_bytes_in_flight == 16.0 * cuda::kGemmWeightVectors * cuda::kGemmStages);
            CHECK(facts->stack_bytes == 0);
            const std::string source = kernel->source();
            const std::string group = cuda::group_source({{source, kernel->entry()}, {source, kernel->entry()}});
            const auto grouped = cuda::sass_facts(*cuda::Nvrtc::get().compile(group, 90, "group"), std::string(cuda::kGroupEntry));
            REQUIRE(grouped.has_value());
            CHECK(grouped->main_loop_bytes_in_flight == facts->main_loop_bytes_in_flight);
        }
#endif
    }
#ifdef LUMINAL_HAS_CUDA_TOOLKIT
    CHECK(products[1] == 3 * products[0]);
#endif
}

TEST_CASE("the expert GEMM and the gated expert GEMV on the device equal the routed mixture by loops" * doctest::skip(!cuda::device_available())) {
    const std::vector<Mixture> mixtures = {{5, 4, 136, 40, DType::BF16}, {4, 2, 264, 64, DType::BF16}};
    check_mixtures<cuda::CudaRuntime>(mixtures, {70, 150}, 128, kPrefillProducts);
    check_mixtures<cuda::CudaRuntime>({{128, 8, 64, 32, DType::BF16}, {8, 2, 40, 24, DType::F16}}, {1, 3});
}

TEST_CASE("block-quantized experts as their blocks: every kept format, f32 and 8-bit activations, on the host emulator and "
          "through the printed source") {
    CompileOptions options;
    options.verbosity = 0;
    {
        luminal_test::QuantizedExperts experts;
        auto [rt, report] = compile_with_report(experts.cx, luminal_test::CompilingEmulator{}, options);
        experts.check_program(report.program.to_string());
        experts.run_and_check(rt);
    }
    luminal_test::QuantizedExperts experts;
    auto [rt, report] = compile_with_report(experts.cx, luminal_test::PrintedSourceEmulator{}, options);
    experts.check_program(report.program.to_string());
    luminal_test::NvrtcCoverage::get().compile(rt.plan());
    experts.run_and_check(rt);
}

TEST_CASE("gate and up of block-quantized experts as one expert GEMV with SiLU(gate) * up: every kept format, f32 and 8-bit "
          "activations, on the host emulator and through the printed source") {
    CompileOptions options;
    options.verbosity = 0;
    {
        luminal_test::QuantizedGateUp experts;
        auto [rt, report] = compile_with_report(experts.cx, luminal_test::CompilingEmulator{}, options);
        CHECK(expert_products(report.program, cuda::ExpertGateUpOp::name) == 2 * std::size(kBlockQuantized));
        experts.run_and_check(rt);
    }
    luminal_test::QuantizedGateUp experts;
    auto [rt, report] = compile_with_report(experts.cx, luminal_test::PrintedSourceEmulator{}, options);
    CHECK(expert_products(report.program, cuda::ExpertGateUpOp::name) == 2 * std::size(kBlockQuantized));
    luminal_test::NvrtcCoverage::get().compile(rt.plan());
    experts.run_and_check(rt);
}

TEST_CASE("an expert index outside [0, E) is an Error, on the host emulator and from the printed kernel's fault") {
    check_out_of_range<luminal_test::CompilingEmulator>("picks expert");
    check_out_of_range<luminal_test::PrintedSourceEmulator>("kernel fault 4");
}

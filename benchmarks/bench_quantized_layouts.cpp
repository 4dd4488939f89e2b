// The quantized products of a SmolLM2-1.7B-sized projection (2048 -> 8192, the
// MLP's up/gate) with 8-bit activations, weights repacked with 8 rows interleaved
// against the same weights as blocks (the kernels the search can also pick), on
// the best instruction set here, one thread: 1 activation row (decode) and 64
// (a prompt's tile). Prints the ratios interleaved / blocks (below 1: interleaved
// is faster). Run with --benchmark_repetitions=N for medians.
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ratio_main.hpp"

namespace {

namespace q = luminal::cpu::quant;
using luminal::QuantFormat;

constexpr std::int64_t kOut = 8192, kIn = 2048;

// Random blocks of format F with small finite f16 scales (every other byte random).
template <QuantFormat F>
std::vector<std::byte> random_weight() {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<std::byte> out(static_cast<std::size_t>(luminal::quantized_bytes(F, kOut, kIn)));
    for (std::byte& b : out) b = static_cast<std::byte>(byte(rng));
    const std::uint16_t scale = luminal::f32_to_f16_bits(0.01f);
    const std::int64_t scale_at = F == QuantFormat::Q6_K ? 208 : 0;
    for (std::size_t b = 0; b < out.size(); b += q::block_bytes<F>) {
        std::memcpy(out.data() + b + scale_at, &scale, 2);
        if constexpr (F == QuantFormat::Q4_K || q::has_offset<F>) std::memcpy(out.data() + b + 2, &scale, 2);
    }
    return out;
}

template <QuantFormat F>
void product(benchmark::State& state, bool interleaved, std::int64_t m) {
    const q::Isa isa = q::best_isa();
    const std::vector<std::byte> blocks = random_weight<F>();
    std::vector<std::byte> repacked(blocks.size());
    q::interleave_groups<F>(blocks.data(), kIn, 0, kOut / q::kInterleave, repacked.data());
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> a(static_cast<std::size_t>(m * kIn)), out(static_cast<std::size_t>(m * kOut));
    for (float& v : a) v = normal(rng);
    q::Q8Rows x;
    q::size_rows(m, kIn, x);
    q::quantize_rows(isa, a.data(), kIn, kIn, 0, m, x);
    if constexpr (F == QuantFormat::Q6_K) q::sum_halves(x);
    const std::int64_t row_bytes = luminal::quantized_bytes(F, 1, kIn);
    for (auto _ : state) {
        const q::ProductTask t{interleaved ? repacked.data() : blocks.data(), row_bytes, kIn, 0, kOut, out.data(), kOut};
        if (interleaved) q::interleaved_q8_product<F>(isa, t, x);
        else q::q8_product<F>(isa, t, x);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetLabel(q::name_of(isa));
}

}  // namespace

template <QuantFormat F>
void register_format(std::vector<std::pair<std::string, std::string>>& pairs) {
    for (std::int64_t m : {1, 64}) {
        const std::string suffix = std::string(luminal::io::name_of(F)) + "_m" + std::to_string(m);
        for (bool interleaved : {false, true})
            benchmark::RegisterBenchmark(("BM_" + std::string(interleaved ? "interleaved_" : "blocks_") + suffix).c_str(),
                                         [=](benchmark::State& state) { product<F>(state, interleaved, m); })
                ->Unit(benchmark::kMicrosecond);
        pairs.emplace_back("BM_interleaved_" + suffix, "BM_blocks_" + suffix);
    }
}

int main(int argc, char** argv) {
    std::vector<std::pair<std::string, std::string>> pairs;
    register_format<QuantFormat::Q4_K>(pairs);
    register_format<QuantFormat::Q6_K>(pairs);
    register_format<QuantFormat::Q4_0>(pairs);
    return luminal_bench::run_with_ratios(argc, argv, pairs);
}

// The attention products of one decode step of a SmolLM2-1.7B-sized model
// (24 layers, 32 heads of 64, no grouping, 320 cached positions): per layer
// the scores q k^T and the output weights v over the whole cache, read from a
// different layer's cache each time (126 MB of f32 caches: from memory, as in a
// decode step). Ours: few_rows.hpp's batched products (f32, f16 and bf16
// caches, on the best instruction set, 1 thread and a pool of 2); the peer:
// Eigen's GEMV per head over the f32 cache (the CPU path before few_rows).
// Prints the ratios ours / peer (below 1: ours faster); run with
// --benchmark_repetitions=N for medians.
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ratio_main.hpp"

namespace {

using luminal::DType;
namespace few = luminal::cpu::few_rows;

constexpr std::int64_t kLayers = 24, kHeads = 32, kHeadDim = 64, kPositions = 320;
constexpr std::int64_t kRowStride = kHeads * kHeadDim;  // a cached position's keys of every head
constexpr std::int64_t kCacheElements = kPositions * kRowStride;

struct Caches {
    std::vector<float> f32;              // keys then values of every layer
    std::vector<std::uint16_t> f16, bf16;
    std::vector<float> query, weights, scores, out;
    Caches() {
        std::mt19937 rng(11);
        std::normal_distribution<float> normal;
        f32.resize(static_cast<std::size_t>(2 * kLayers * kCacheElements));
        for (float& v : f32) v = normal(rng);
        f16.resize(f32.size());
        bf16.resize(f32.size());
        for (std::size_t i = 0; i < f32.size(); ++i) {
            f16[i] = luminal::f32_to_f16_bits(f32[i]);
            bf16[i] = luminal::f32_to_bf16_bits(f32[i]);
        }
        query.resize(static_cast<std::size_t>(kHeads * kHeadDim));
        weights.resize(static_cast<std::size_t>(kHeads * kPositions));
        for (float& v : query) v = normal(rng);
        for (float& v : weights) v = 1.0f / kPositions;
        scores.resize(weights.size());
        out.resize(query.size());
    }
    const void* keys(DType d, std::int64_t layer) const { return at(d, 2 * layer * kCacheElements); }
    const void* values(DType d, std::int64_t layer) const { return at(d, (2 * layer + 1) * kCacheElements); }
    const void* at(DType d, std::int64_t offset) const {
        if (d == DType::F16) return f16.data() + offset;
        if (d == DType::BF16) return bf16.data() + offset;
        return f32.data() + offset;
    }
};

Caches& caches() {
    static Caches c;
    return c;
}

template <DType D>
void ours(benchmark::State& state, std::size_t threads) {
    Caches& c = caches();
    const luminal::cpu::quant::Isa isa = luminal::cpu::quant::best_isa();
    luminal::cpu::ThreadPool pool(threads);
    const auto size = static_cast<std::int64_t>(luminal::size_of(D));
    std::vector<few::Batch> scores(kHeads), outputs(kHeads);
    few::Scratch scratch;
    for (auto _ : state)
        for (std::int64_t layer = 0; layer < kLayers; ++layer) {
            for (std::int64_t h = 0; h < kHeads; ++h) {
                scores[h] = {c.query.data() + h * kHeadDim,
                             static_cast<const char*>(c.keys(D, layer)) + h * kHeadDim * size,
                             c.scores.data() + h * kPositions};
                outputs[h] = {c.weights.data() + h * kPositions,
                              static_cast<const char*>(c.values(D, layer)) + h * kHeadDim * size,
                              c.out.data() + h * kHeadDim};
            }
            few::rows_product<D>(isa, scores.data(), kHeads, 1, kHeadDim, kHeadDim, kPositions, kRowStride, kPositions,
                                 &pool);
            few::columns_product<D>(isa, outputs.data(), kHeads, 1, kPositions, kPositions, 1, kHeadDim, kRowStride,
                                    kHeadDim, scratch, &pool);
            benchmark::DoNotOptimize(c.out.data());
        }
    state.SetLabel(luminal::cpu::quant::name_of(isa));
}

void eigen_per_head(benchmark::State& state) {
    Caches& c = caches();
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    for (auto _ : state)
        for (std::int64_t layer = 0; layer < kLayers; ++layer)
            for (std::int64_t h = 0; h < kHeads; ++h) {
                const float* keys = c.f32.data() + 2 * layer * kCacheElements + h * kHeadDim;
                const float* values = c.f32.data() + (2 * layer + 1) * kCacheElements + h * kHeadDim;
                Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>> k(keys, kPositions, kHeadDim,
                                                                      Eigen::OuterStride<>(kRowStride));
                Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>> v(values, kPositions, kHeadDim,
                                                                      Eigen::OuterStride<>(kRowStride));
                Eigen::Map<const Eigen::RowVectorXf> q(c.query.data() + h * kHeadDim, kHeadDim);
                Eigen::Map<const Eigen::RowVectorXf> w(c.weights.data() + h * kPositions, kPositions);
                Eigen::Map<Eigen::RowVectorXf>(c.scores.data() + h * kPositions, kPositions).noalias() = q * k.transpose();
                Eigen::Map<Eigen::RowVectorXf>(c.out.data() + h * kHeadDim, kHeadDim).noalias() = w * v;
                benchmark::DoNotOptimize(c.out.data());
            }
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::pair<std::string, std::string>> pairs;
    benchmark::RegisterBenchmark("BM_eigen_per_head_f32", eigen_per_head)->Unit(benchmark::kMicrosecond);
    for (std::size_t threads : {1, 2}) {
        const std::string suffix = "_t" + std::to_string(threads);
        benchmark::RegisterBenchmark(("BM_few_rows_f32" + suffix).c_str(),
                                     [=](benchmark::State& s) { ours<DType::F32>(s, threads); })->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("BM_few_rows_f16" + suffix).c_str(),
                                     [=](benchmark::State& s) { ours<DType::F16>(s, threads); })->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("BM_few_rows_bf16" + suffix).c_str(),
                                     [=](benchmark::State& s) { ours<DType::BF16>(s, threads); })->Unit(benchmark::kMicrosecond);
        for (const char* d : {"f32", "f16", "bf16"})
            pairs.emplace_back(std::string("BM_few_rows_") + d + suffix, "BM_eigen_per_head_f32");
    }
    return luminal_bench::run_with_ratios(argc, argv, pairs);
}

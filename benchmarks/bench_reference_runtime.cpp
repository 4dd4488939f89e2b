// The reference runtime interprets primitives element by element; this measures
// how far that is from an optimised peer (Eigen) on the same matmul and softmax,
// so the cost of using it as an oracle is known. Prints median ratios.
#include <Eigen/Dense>
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include "bench_data.hpp"
#include "eigen_peers.hpp"
#include "ratio_main.hpp"

namespace {

using luminal_bench::random_values;

constexpr int kSize = 64;

void BM_ReferenceMatmul(benchmark::State& state) {
    luminal::Graph g;
    auto a = g.tensor({kSize, kSize}), b = g.tensor({kSize, kSize});
    a.matmul(b).output();
    auto rt = g.compile(luminal::ReferenceRuntime{});
    rt.set_data(a, random_values(kSize * kSize));
    rt.set_data(b, random_values(kSize * kSize));
    for (auto _ : state) rt.execute(g.dyn_map());
}

void BM_EigenMatmul(benchmark::State& state) {
    luminal_bench::eigen_matmul(state, kSize);
}

void BM_ReferenceSoftmax(benchmark::State& state) {
    luminal::Graph g;
    auto x = g.tensor({kSize, kSize});
    x.softmax(-1).output();
    auto rt = g.compile(luminal::ReferenceRuntime{});
    rt.set_data(x, random_values(kSize * kSize));
    for (auto _ : state) rt.execute(g.dyn_map());
}

void BM_EigenSoftmax(benchmark::State& state) {
    Eigen::MatrixXf x = Eigen::Map<Eigen::MatrixXf>(random_values(kSize * kSize).data(), kSize, kSize);
    Eigen::MatrixXf y(kSize, kSize);
    for (auto _ : state) {
        Eigen::VectorXf m = x.rowwise().maxCoeff();
        y = (x.colwise() - m).array().exp().matrix();
        Eigen::VectorXf s = y.rowwise().sum();
        y = y.array().colwise() / s.array();
        benchmark::DoNotOptimize(y.data());
    }
}

BENCHMARK(BM_ReferenceMatmul);
BENCHMARK(BM_EigenMatmul);
BENCHMARK(BM_ReferenceSoftmax);
BENCHMARK(BM_EigenSoftmax);

}  // namespace

int main(int argc, char** argv) {
    return luminal_bench::run_with_ratios(
        argc, argv, {{"BM_ReferenceMatmul", "BM_EigenMatmul"}, {"BM_ReferenceSoftmax", "BM_EigenSoftmax"}});
}

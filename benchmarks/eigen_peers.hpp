#pragma once
// Eigen doing the same work as a luminal benchmark: the peer its ratio is against.
#include <Eigen/Dense>
#include <benchmark/benchmark.h>

#include "bench_data.hpp"

namespace luminal_bench {

inline void eigen_matmul(benchmark::State& state, int size) {
    Eigen::MatrixXf a = Eigen::Map<Eigen::MatrixXf>(random_values(std::size_t(size) * size).data(), size, size);
    Eigen::MatrixXf b = Eigen::Map<Eigen::MatrixXf>(random_values(std::size_t(size) * size).data(), size, size);
    Eigen::MatrixXf c(size, size);
    for (auto _ : state) {
        c.noalias() = a * b;
        benchmark::DoNotOptimize(c.data());
    }
}

}  // namespace luminal_bench

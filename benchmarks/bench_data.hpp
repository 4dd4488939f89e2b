#pragma once
// Reproducible input data for benchmarks (a fixed LCG, values in [-0.5, 0.5)).
#include <cstdint>
#include <vector>

namespace luminal_bench {

inline std::vector<float> random_values(std::size_t n) {
    std::vector<float> v(n);
    std::uint32_t state = 12345;
    for (float& x : v) {
        state = state * 1664525u + 1013904223u;
        x = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

}  // namespace luminal_bench

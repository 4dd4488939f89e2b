#pragma once
// Picking the next token from a row of logits: greedy at temperature 0,
// otherwise softmax(logits / temperature) over the top_k best (all when 0),
// drawn with a seeded generator so a run can be repeated.
#include "luminal/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

namespace luminal::nn {

class Sampler {
public:
    Sampler(double temperature, std::int64_t top_k, std::uint64_t seed)
        : temperature_(temperature), top_k_(top_k), rng_(seed) {
        check(temperature >= 0 && std::isfinite(temperature), "Sampler", "temperature must be >= 0, got {}",
              temperature);
        check(top_k >= 0, "Sampler", "top_k must be >= 0, got {}", top_k);
    }

    std::int32_t operator()(std::span<const float> logits) {
        check(!logits.empty(), "Sampler", "no logits");
        if (temperature_ == 0) return argmax(logits);
        std::vector<std::int32_t> order(logits.size());
        std::iota(order.begin(), order.end(), 0);
        const auto keep = top_k_ == 0 ? order.size() : std::min<std::size_t>(order.size(), static_cast<std::size_t>(top_k_));
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                          [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
        order.resize(keep);
        std::vector<double> weights;
        const double best = logits[order[0]];
        for (std::int32_t id : order) weights.push_back(std::exp((logits[id] - best) / temperature_));
        std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
        return order[pick(rng_)];
    }

    static std::int32_t argmax(std::span<const float> logits) {
        return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }

private:
    double temperature_;
    std::int64_t top_k_;
    std::mt19937_64 rng_;
};

}  // namespace luminal::nn

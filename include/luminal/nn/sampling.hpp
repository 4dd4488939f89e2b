#pragma once
// Picking the next token from a row of logits: greedy at temperature 0,
// otherwise softmax(logits / temperature) over the top_k best (all when 0),
// drawn with a seeded generator so a run can be repeated.
//
// A model's vocabulary is often padded past its tokenizer's (Qwen3: 151936
// logits for about 151669 tokens); the padded ids have no text. A sampler made
// with a `pickable` mask only ever returns ids the mask allows, so generation
// stays within what the tokenizer can decode; decodable_ids() builds that mask.
#include "luminal/core/error.hpp"
#include "luminal/io/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace luminal::nn {

// Which of a model's `vocab_size` ids the tokenizer has a token for; empty when
// all of them (no mask needed).
inline std::vector<bool> decodable_ids(const io::Tokenizer& tokenizer, std::int64_t vocab_size) {
    std::vector<bool> decodable(static_cast<std::size_t>(vocab_size));
    for (std::int64_t id = 0; id < vocab_size; ++id)
        decodable[static_cast<std::size_t>(id)] = tokenizer.id_to_token(static_cast<std::int32_t>(id)).has_value();
    if (std::all_of(decodable.begin(), decodable.end(), [](bool b) { return b; })) return {};
    return decodable;
}

class Sampler {
public:
    // `pickable`: empty lets every id be picked; otherwise only ids i with
    // pickable[i] (ids past its end never).
    Sampler(double temperature, std::int64_t top_k, std::uint64_t seed, std::vector<bool> pickable = {})
        : temperature_(temperature), top_k_(top_k), rng_(seed), pickable_(std::move(pickable)) {
        check(temperature >= 0 && std::isfinite(temperature), "Sampler", "temperature must be >= 0, got {}",
              temperature);
        check(top_k >= 0, "Sampler", "top_k must be >= 0, got {}", top_k);
        check(pickable_.empty() || std::find(pickable_.begin(), pickable_.end(), true) != pickable_.end(), "Sampler",
              "the pickable mask allows no id");
    }

    std::int32_t operator()(std::span<const float> logits) {
        check(!logits.empty(), "Sampler", "no logits");
        std::vector<std::int32_t> order;
        order.reserve(logits.size());
        for (std::size_t id = 0; id < logits.size(); ++id)
            if (pickable(id)) order.push_back(static_cast<std::int32_t>(id));
        check(!order.empty(), "Sampler", "none of the {} logits is of a pickable id", logits.size());
        if (temperature_ == 0)
            return *std::max_element(order.begin(), order.end(),
                                     [&](std::int32_t a, std::int32_t b) { return logits[a] < logits[b]; });
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
    bool pickable(std::size_t id) const { return pickable_.empty() || (id < pickable_.size() && pickable_[id]); }

    double temperature_;
    std::int64_t top_k_;
    std::mt19937_64 rng_;
    std::vector<bool> pickable_;
};

}  // namespace luminal::nn

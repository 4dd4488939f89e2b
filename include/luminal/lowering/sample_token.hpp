#pragma once
// SampleToken: the next token of each row of logits, picked where the logits
// are, so only the token's id leaves the device. Inputs: logits [rows, V]
// (f32), a bias [V] added to them (0, or -inf for ids never to be picked: a
// padded vocabulary), and settings [3] (temperature, top_k, seed). At
// temperature 0 the pick is the first maximum; otherwise the ids whose biased
// logit is at least the top_k-th largest (all when top_k is 0) compete by
// logit / temperature + Gumbel noise, which draws each with its softmax
// probability. The noise of id i is a hash of (seed, counter, i), the counter
// a per-step value (the cached tokens p): the same seed repeats a run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "luminal/cpu/op.hpp"
#include "luminal/graph/backend_op.hpp"

namespace luminal {

namespace sampling_detail {

// A uniform draw in (0, 1) on a grid of 2^-24, exact in f32; the device kernel prints the same hash.
inline float uniform(std::uint64_t seed, std::uint64_t counter, std::uint64_t id) {
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + counter * 0xD1B54A32D192ED03ull + id;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (static_cast<float>(x >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

inline std::int32_t pick(std::span<const float> logits, std::span<const float> bias, float temperature, std::int64_t top_k,
                         std::uint64_t seed, std::uint64_t counter) {
    const std::size_t n = logits.size();
    std::vector<float> keys(n);
    for (std::size_t i = 0; i < n; ++i) keys[i] = logits[i] + bias[i];
    auto first_max = [&](auto score) {
        std::int32_t best = 0;
        float best_score = -std::numeric_limits<float>::infinity();
        for (std::size_t i = 0; i < n; ++i)
            if (const float s = score(i); s > best_score) best_score = s, best = static_cast<std::int32_t>(i);
        return best;
    };
    if (temperature == 0) return first_max([&](std::size_t i) { return keys[i]; });
    float threshold = -std::numeric_limits<float>::infinity();
    if (top_k > 0 && static_cast<std::size_t>(top_k) < n) {
        std::vector<float> sorted = keys;
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
        threshold = sorted[static_cast<std::size_t>(top_k - 1)];
    }
    return first_max([&](std::size_t i) {
        if (keys[i] < threshold || std::isinf(keys[i])) return -std::numeric_limits<float>::infinity();
        return keys[i] / temperature - std::log(-std::log(uniform(seed, counter, i)));
    });
}

}  // namespace sampling_detail

struct SampleTokenOp {
    static constexpr std::string_view name = "SampleToken";
    Expression counter;

    bool operator==(const SampleTokenOp&) const = default;
    std::size_t hash() const { return counter.hash() ^ 0x5A3Bu; }
    std::string attributes() const { return fmt::format("counter={}", counter); }
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape rows = inputs[0].dims();
        rows.pop_back();
        return rows;
    }
    DType dtype(std::span<const DType>) const { return DType::I32; }

    void reference(const ReferenceCall& call) const {
        const ReferenceInput &logits = call.inputs[0], &bias = call.inputs[1], &settings = call.inputs[2];
        const std::int64_t v = logits.dim(logits.rank() - 1), rows = v > 0 ? logits.numel() / v : 0;
        std::vector<float> row(static_cast<std::size_t>(v)), added(static_cast<std::size_t>(v));
        for (std::int64_t i = 0; i < v; ++i) added[i] = static_cast<float>(bias.f(i));
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t i = 0; i < v; ++i) row[i] = static_cast<float>(logits.f(r * v + i));
            call.out.store_int(static_cast<std::size_t>(r),
                               sampling_detail::pick(row, added, static_cast<float>(settings.f(0)), static_cast<std::int64_t>(settings.f(1)),
                                                     static_cast<std::uint64_t>(settings.f(2)),
                                                     static_cast<std::uint64_t>(counter.eval(call.dims))));
        }
    }
    void cpu(const CpuOpCall& call) const {
        const CpuTensor &logits = call.inputs[0], &bias = call.inputs[1], &settings = call.inputs[2];
        check(logits.dtype == DType::F32 && bias.dtype == DType::F32 && settings.dtype == DType::F32, "SampleToken",
              "logits, bias and settings must be f32");
        const std::int64_t v = logits.dims.back(), rows = v > 0 ? logits.numel() / v : 0;
        const float* s = settings.as<float>();
        for (std::int64_t r = 0; r < rows; ++r)
            call.out.as<std::int32_t>()[r] = sampling_detail::pick(
                std::span(logits.as<float>() + r * v, static_cast<std::size_t>(v)), std::span(bias.as<float>(), static_cast<std::size_t>(v)),
                s[0], static_cast<std::int64_t>(s[1]), static_cast<std::uint64_t>(s[2]), static_cast<std::uint64_t>(counter.eval(call.dims)));
    }
};

}  // namespace luminal

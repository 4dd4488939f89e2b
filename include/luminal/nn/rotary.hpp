#pragma once
// Rotary position embeddings (split-half layout, as Hugging Face applies them)
// for every RoPE type of transformers' rope_init_fns. The inverse frequencies
// are computed on the host in f32, the way transformers computes them, and bound
// as a computed parameter; the angles (position x frequency) and their cos/sin
// are computed in the graph for positions p .. p+s-1.
//
// Two types change their frequencies with the sequence length L = p + s (the
// last position + 1), as transformers' dynamic_rope_update does at each forward:
// longrope uses its long factors once L passes the pretraining context, and
// dynamic (NTK) grows its base once L passes max_position_embeddings. Keys
// already cached keep the rotation they were written with, as in transformers.
#include "luminal/core/error.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/io/rope_config.hpp"
#include "luminal/nn/parameters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

namespace luminal::nn {

namespace detail {

// theta^(i/dim) for i = 0, 2, .., dim-2, in f32 as torch computes base ** arange / dim.
inline std::vector<float> rope_powers(double theta, std::int64_t dim) {
    std::vector<float> powers;
    for (std::int64_t i = 0; i < dim; i += 2)
        powers.push_back(std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(dim)));
    return powers;
}

inline std::int64_t rotary_dimension(const io::RopeConfig& rope, std::int64_t head_dim) {
    const auto dim = static_cast<std::int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
    check(dim >= 2 && dim % 2 == 0, "rope", "rotary dimension {} (head_dim {} x partial_rotary_factor {}) must be even "
          "and at least 2", dim, head_dim, rope.partial_rotary_factor);
    return dim;
}

// YaRN: frequencies whose wavelength fits the pretraining context many times
// (more than beta_fast rotations) stay, those fitting fewer than beta_slow are
// divided by `factor`, with a linear ramp over the pairs between.
inline std::vector<float> yarn_inverse_frequencies(const io::RopeConfig& rope, std::int64_t dim) {
    const double context = static_cast<double>(rope.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
        return static_cast<double>(dim) * std::log(context / (rotations * 2 * std::numbers::pi)) /
               (2 * std::log(rope.theta));
    };
    double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
    if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // as transformers: no zero-width ramp
    const auto factor = static_cast<float>(rope.factor);
    std::vector<float> inv;
    const std::vector<float> powers = rope_powers(rope.theta, dim);
    for (std::size_t i = 0; i < powers.size(); ++i) {
        const float ramp = std::clamp(static_cast<float>((static_cast<float>(i) - low) / (high - low)), 0.0f, 1.0f);
        const float extrapolation = 1.0f - ramp;
        const float interpolated = 1.0f / (factor * powers[i]), kept = 1.0f / powers[i];
        inv.push_back(interpolated * (1.0f - extrapolation) + kept * extrapolation);
    }
    return inv;
}

inline std::vector<float> longrope_inverse_frequencies(const io::RopeConfig& rope, std::int64_t dim,
                                                       const std::vector<double>& factors) {
    const std::vector<float> powers = rope_powers(rope.theta, dim);
    check(factors.size() == powers.size(), "rope", "longrope has {} factors for {} rotated pairs (head_dim x "
          "partial_rotary_factor = {})", factors.size(), powers.size(), dim);
    std::vector<float> inv;
    for (std::size_t i = 0; i < powers.size(); ++i) inv.push_back(1.0f / (static_cast<float>(factors[i]) * powers[i]));
    return inv;
}

}  // namespace detail

// inv_freq of transformers' RoPE initialisers, one per rotated pair (for
// longrope, the short factors; for dynamic, the frequencies up to
// max_position_embeddings).
inline std::vector<float> rope_inverse_frequencies(const io::RopeConfig& rope, std::int64_t head_dim) {
    using io::RopeType;
    const auto theta = static_cast<float>(rope.theta);
    std::vector<float> inv;
    if (rope.type == RopeType::Proportional) {
        // The first floor(partial * head_dim / 2) pairs rotate, with frequencies
        // of the whole head; the others stay put (frequency 0).
        const auto angles = static_cast<std::int64_t>(std::floor(rope.partial_rotary_factor * head_dim / 2));
        for (std::int64_t i = 0; i < head_dim / 2; ++i)
            inv.push_back(i < angles ? 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim)) /
                                           static_cast<float>(rope.factor)
                                     : 0.0f);
        return inv;
    }
    const std::int64_t dim = detail::rotary_dimension(rope, head_dim);
    if (rope.type == RopeType::Yarn) return detail::yarn_inverse_frequencies(rope, dim);
    if (rope.type == RopeType::LongRope) return detail::longrope_inverse_frequencies(rope, dim, rope.short_factor);
    for (float power : detail::rope_powers(rope.theta, dim)) inv.push_back(1.0f / power);
    if (!rope.frequency_factors.empty()) {
        check(rope.frequency_factors.size() == inv.size(), "rope", "{} frequency factors for {} rotated pairs",
              rope.frequency_factors.size(), inv.size());
        for (std::size_t i = 0; i < inv.size(); ++i) inv[i] /= static_cast<float>(rope.frequency_factors[i]);
    }
    if (rope.type == RopeType::Linear) {
        for (float& f : inv) f /= static_cast<float>(rope.factor);
    } else if (rope.type == RopeType::Llama3) {
        // Long wavelengths slow down by `factor`, short ones stay, and the band
        // between is interpolated smoothly.
        const double old_context = static_cast<double>(rope.original_max_position_embeddings);
        const double low_wavelen = old_context / rope.low_freq_factor;
        const double high_wavelen = old_context / rope.high_freq_factor;
        for (float& f : inv) {
            const double wavelen = 2 * std::numbers::pi / f;
            if (wavelen > low_wavelen) {
                f = static_cast<float>(f / rope.factor);
            } else if (wavelen >= high_wavelen) {
                const double smooth =
                    (old_context / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
                f = static_cast<float>((1 - smooth) * f / rope.factor + smooth * f);
            }
        }
    }
    return inv;
}

// The factor transformers multiplies cos and sin by (YaRN's mscale, LongRoPE's
// sqrt(1 + ln(factor) / ln(context))); 1 for the other types.
inline double rope_attention_scaling(const io::RopeConfig& rope) {
    using io::RopeType;
    if (rope.attention_factor) return *rope.attention_factor;
    if (rope.type == RopeType::Yarn) {
        auto mscale = [&](double scale) { return rope.factor <= 1 ? 1.0 : 0.1 * scale * std::log(rope.factor) + 1.0; };
        // transformers tests both for truthiness: a zero or missing one means plain mscale(1).
        if (rope.mscale.value_or(0) != 0 && rope.mscale_all_dim.value_or(0) != 0)
            return mscale(*rope.mscale) / mscale(*rope.mscale_all_dim);
        return mscale(1.0);
    }
    if (rope.type == RopeType::LongRope && rope.factor > 1)
        return std::sqrt(1 + std::log(rope.factor) / std::log(static_cast<double>(rope.original_max_position_embeddings)));
    return 1.0;
}

struct Rotary {
    // [rotary_dim / 2]: the frequencies; for dynamic, the exponents 2i/dim of its base.
    GraphTensor inverse_frequencies;
    std::int64_t rotary_dim = 0;  // leading dims of each head that rotate
    double attention_scaling = 1.0;
    // LongRoPE: the frequencies once L exceeds `long_after`.
    std::optional<GraphTensor> long_inverse_frequencies;
    std::int64_t long_after = 0;
    // Dynamic NTK: base = theta * (factor * L' / M - (factor - 1))^(dim / (dim - 2)), L' = max(L, M).
    std::optional<io::RopeConfig> dynamic;

    static Rotary create(ParameterSet& params, Graph& cx, const std::string& name, const io::RopeConfig& rope,
                         std::int64_t head_dim) {
        const double scaling = rope_attention_scaling(rope);
        if (rope.type == io::RopeType::Dynamic) {
            const std::int64_t dim = detail::rotary_dimension(rope, head_dim);
            check(dim > 2, "rope", "dynamic RoPE needs a rotary dimension above 2, got {}", dim);
            std::vector<float> exponents;
            for (std::int64_t i = 0; i < dim; i += 2) exponents.push_back(static_cast<float>(i) / static_cast<float>(dim));
            return {params.add_computed(cx, name, std::move(exponents)), dim, scaling, std::nullopt, 0, rope};
        }
        std::vector<float> inv = rope_inverse_frequencies(rope, head_dim);
        const auto dim = static_cast<std::int64_t>(2 * inv.size());
        GraphTensor frequencies = params.add_computed(cx, name, std::move(inv));
        if (rope.type != io::RopeType::LongRope) return {frequencies, dim, scaling, std::nullopt, 0, std::nullopt};
        GraphTensor long_frequencies =
            params.add_computed(cx, name + ".long", detail::longrope_inverse_frequencies(rope, dim, rope.long_factor));
        return {frequencies, dim, scaling, long_frequencies, rope.original_max_position_embeddings, std::nullopt};
    }

    // The frequencies for a sequence of `length` = p + s tokens.
    GraphTensor frequencies(Graph& cx, Expression length) const {
        const Shape half{Expression(rotary_dim / 2)};
        if (long_inverse_frequencies) {
            GraphTensor beyond = cx.iota(gt(length, Expression(long_after)), half).cast(DType::Bool);
            return where(beyond, *long_inverse_frequencies, inverse_frequencies);
        }
        if (dynamic) {
            const double factor = dynamic->factor, context = static_cast<double>(dynamic->max_position_embeddings);
            const double dim = static_cast<double>(rotary_dim);
            GraphTensor grown = cx.iota(max(length, Expression(dynamic->max_position_embeddings)), half).cast(DType::F32);
            GraphTensor ratio = grown * (factor / context) - (factor - 1);
            GraphTensor log2_base = ratio.log2() * (dim / (dim - 2)) + std::log2(dynamic->theta);
            GraphTensor exponent = inverse_frequencies * log2_base * -1.0;
            return exponent.exp2();
        }
        return inverse_frequencies;
    }

    // x: [s, heads, head_dim] for the tokens at positions p .. p+s-1.
    GraphTensor operator()(const GraphTensor& x, Expression p) const {
        Graph& cx = x.graph();
        const Expression s = x.view().dim(0);
        const std::int64_t half = rotary_dim / 2;
        GraphTensor positions = cx.iota(p + Expression::index(), {s}).cast(DType::F32);
        GraphTensor angles = positions.unsqueeze(1) * frequencies(cx, p + s).unsqueeze(0);  // [s, half]
        GraphTensor cos = angles.cos().unsqueeze(1), sin = angles.sin().unsqueeze(1);  // [s, 1, half]
        if (attention_scaling != 1.0) {
            cos = cos * attention_scaling;
            sin = sin * attention_scaling;
        }
        GraphTensor x1 = x.slice_along(-1, 0, half), x2 = x.slice_along(-1, half, rotary_dim);
        GraphTensor rotated = (x1 * cos - x2 * sin).concat_along(x2 * cos + x1 * sin, -1);
        const Expression head_dim = x.view().dim(2);
        if (head_dim == Expression(rotary_dim)) return rotated;
        return rotated.concat_along(x.slice_along(-1, rotary_dim, head_dim), -1);
    }
};

}  // namespace luminal::nn

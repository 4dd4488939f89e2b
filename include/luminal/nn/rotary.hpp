#pragma once
// Rotary position embeddings (split-half layout, as Hugging Face applies them)
// for every RoPE type the bundled families use. The inverse frequencies are
// computed on the host in f32, the way transformers computes them, and bound
// as a computed parameter; the angles (position x frequency) and their cos/sin
// are computed in the graph for positions p .. p+s-1.
#include "luminal/core/error.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/io/rope_config.hpp"
#include "luminal/nn/parameters.hpp"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

namespace luminal::nn {

// inv_freq of transformers' RoPE initialisers, one per rotated pair.
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
    const auto dim = static_cast<std::int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
    check(dim >= 2 && dim % 2 == 0, "rope", "rotary dimension {} (head_dim {} x partial_rotary_factor {}) must be even "
          "and at least 2", dim, head_dim, rope.partial_rotary_factor);
    for (std::int64_t i = 0; i < dim; i += 2)
        inv.push_back(1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(dim)));
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

struct Rotary {
    GraphTensor inverse_frequencies;  // [rotary_dim / 2]
    std::int64_t rotary_dim = 0;      // leading dims of each head that rotate

    static Rotary create(ParameterSet& params, Graph& cx, const std::string& name, const io::RopeConfig& rope,
                         std::int64_t head_dim) {
        std::vector<float> inv = rope_inverse_frequencies(rope, head_dim);
        const auto rotary_dim = static_cast<std::int64_t>(2 * inv.size());
        return {params.add_computed(cx, name, std::move(inv)), rotary_dim};
    }

    // x: [s, heads, head_dim] for the tokens at positions p .. p+s-1.
    GraphTensor operator()(const GraphTensor& x, Expression p) const {
        Graph& cx = x.graph();
        const Expression s = x.view().dim(0);
        const std::int64_t half = rotary_dim / 2;
        GraphTensor positions = cx.iota(p + Expression::index(), {s}).cast(DType::F32);
        GraphTensor angles = positions.unsqueeze(1) * inverse_frequencies.unsqueeze(0);  // [s, half]
        GraphTensor cos = angles.cos().unsqueeze(1), sin = angles.sin().unsqueeze(1);  // [s, 1, half]
        GraphTensor x1 = x.slice_along(-1, 0, half), x2 = x.slice_along(-1, half, rotary_dim);
        GraphTensor rotated = (x1 * cos - x2 * sin).concat_along(x2 * cos + x1 * sin, -1);
        const Expression head_dim = x.view().dim(2);
        if (head_dim == Expression(rotary_dim)) return rotated;
        return rotated.concat_along(x.slice_along(-1, rotary_dim, head_dim), -1);
    }
};

}  // namespace luminal::nn

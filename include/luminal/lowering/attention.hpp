#pragma once
// Attention: softmax(scale * q k^T + bias) v for each KV head and each
// of its query heads, out[h, g, i, :] = sum_j p_ij v[h, j, :] with
// p_i = softmax_j(scale * q[h, g, i, :] . k[h, j, :] + bias[h, g, i, j]).
// Inputs, each through its view: q [KV, G, S, D], k [KV, G, T, D] and
// v [KV, G, DV, T] (both broadcast over G: every query head of a KV head
// reads the same keys), bias [KV, G, S, T]. Output [KV, G, S, DV]. Found by
// the attention rule (attention_rules.hpp) in the graph nn::attention records;
// a backend-neutral LLIR op each backend runs with its own kernel.
#include <cmath>
#include <limits>
#include <string_view>

#include "luminal/graph/backend_op.hpp"

namespace luminal {

struct AttentionOp {
    static constexpr std::string_view name = "Attention";
    double scale = 1;

    bool operator==(const AttentionOp& o) const { return scale == o.scale; }
    std::size_t hash() const { return std::hash<double>{}(scale) ^ 0xA77Eu; }
    std::string attributes() const { return fmt::format("scale={:.6g}", scale); }
    // [KV, G, S, D] queries, values [KV, G, DV, T] -> [KV, G, S, DV].
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape out = inputs[0].dims();
        out.back() = inputs[2].dim(2);
        return out;
    }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    double flops(const OpCostQuery& q) const {
        const Shape qs = q.inputs[0].dims();
        const double rows = q.elements(Shape(qs.begin(), qs.end() - 1));
        const double t = static_cast<double>(q.inputs[1].dim(2).eval(q.dims));
        const double d = static_cast<double>(qs.back().eval(q.dims)), dv = static_cast<double>(q.inputs[2].dim(2).eval(q.dims));
        return rows * t * (2 * d + 2 * dv + 4);
    }

    // In double: the scores, their maximum, the weights normalised once.
    void reference(const ReferenceCall& call) const {
        const ReferenceInput &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &bias = call.inputs[3];
        const std::int64_t heads = q.dim(0), group = q.dim(1), s = q.dim(2), d = q.dim(3), t = k.dim(2), dv = v.dim(2);
        std::vector<double> scores(static_cast<std::size_t>(t));
        for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t g = 0; g < group; ++g)
                for (std::int64_t i = 0; i < s; ++i) {
                    const std::int64_t row = (h * group + g) * s + i;
                    double best = -std::numeric_limits<double>::infinity();
                    for (std::int64_t j = 0; j < t; ++j) {
                        double dot = 0;
                        for (std::int64_t e = 0; e < d; ++e) dot += q.f(row * d + e) * k.f(((h * group + g) * t + j) * d + e);
                        scores[j] = scale * dot + bias.f(row * t + j);
                        best = std::max(best, scores[j]);
                    }
                    double total = 0;
                    for (std::int64_t j = 0; j < t; ++j) total += scores[j] = std::isinf(best) && best < 0 ? 0.0 : std::exp(scores[j] - best);
                    for (std::int64_t e = 0; e < dv; ++e) {
                        double acc = 0;
                        for (std::int64_t j = 0; j < t; ++j) acc += scores[j] * v.f(((h * group + g) * dv + e) * t + j);
                        call.out.store_double(static_cast<std::size_t>(row * dv + e), total > 0 ? acc / total : std::nan(""));
                    }
                }
    }
};

}  // namespace luminal

#pragma once
// RMSNorm and LayerNorm over the last axis, computed in f32.
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/nn/linear.hpp"
#include "luminal/nn/parameters.hpp"

#include <optional>
#include <string>

namespace luminal::nn {

struct RmsNorm {
    std::optional<GraphTensor> weight;  // none: normalise only (Gemma 4's value norm)
    double epsilon = 1e-6;
    // Gemma 3 scales by (1 + w): its weights are stored centred on 0.
    double weight_offset = 0.0;

    static RmsNorm create(ParameterSet& params, Graph& cx, const std::string& name, std::int64_t dim,
                          double epsilon, double weight_offset = 0.0) {
        return {params.add(cx, name, {dim}), epsilon, weight_offset};
    }
    static RmsNorm unweighted(double epsilon) { return {std::nullopt, epsilon, 0.0}; }

    GraphTensor operator()(const GraphTensor& x) const {
        GraphTensor y = Linear::as_f32(x).rms_norm({-1}, epsilon);
        if (!weight) return y;
        GraphTensor scale = Linear::as_f32(*weight);
        if (weight_offset != 0.0) scale = scale + weight_offset;
        return y * scale;
    }
};

struct LayerNorm {
    GraphTensor weight, bias;
    double epsilon = 1e-5;

    static LayerNorm create(ParameterSet& params, Graph& cx, const std::string& prefix, std::int64_t dim,
                            double epsilon) {
        return {params.add(cx, prefix + ".weight", {dim}), params.add(cx, prefix + ".bias", {dim}), epsilon};
    }

    GraphTensor operator()(const GraphTensor& x) const {
        return Linear::as_f32(x).layer_norm({-1}, epsilon) * Linear::as_f32(weight) + Linear::as_f32(bias);
    }
};

}  // namespace luminal::nn

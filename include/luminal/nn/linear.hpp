#pragma once
// y = x W^T (+ b) with W in Hugging Face's [out, in] layout. A weight stored in
// a 16-bit dtype stays so in memory and is widened to f32 inside the graph.
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/nn/parameters.hpp"

#include <optional>
#include <string>

namespace luminal::nn {

struct Linear {
    GraphTensor weight;
    std::optional<GraphTensor> bias;
    bool narrow_activations = false;  // ModelOptions::narrow_activations

    static Linear create(ParameterSet& params, Graph& cx, const std::string& prefix, std::int64_t in,
                         std::int64_t out, bool with_bias = false, DType dtype = DType::F32) {
        Linear layer{params.add(cx, prefix + ".weight", {out, in}, dtype), std::nullopt, params.narrows_activations()};
        if (with_bias) layer.bias = params.add(cx, prefix + ".bias", {out}, dtype);
        return layer;
    }

    // The layer with its inputs kept exact whatever the model's option.
    Linear with_exact_inputs() const { return {weight, bias, false}; }

    GraphTensor operator()(const GraphTensor& x) const {
        GraphTensor y = product(x, weight, narrow_activations);
        if (bias) y = y + as_f32(*bias);
        return y;
    }

    // x W^T in f32; with `narrow_activations` and a 16-bit W, x is first
    // rounded to W's dtype, so both factors are exact in it.
    static GraphTensor product(const GraphTensor& x, const GraphTensor& w, bool narrow_activations) {
        const bool narrow = narrow_activations && (w.dtype() == DType::BF16 || w.dtype() == DType::F16);
        const GraphTensor rows = narrow ? x.cast(w.dtype()).cast(DType::F32) : x;
        return rows.matmul(as_f32(w).t());
    }

    static GraphTensor as_f32(const GraphTensor& t) { return t.dtype() == DType::F32 ? t : t.cast(DType::F32); }
};

}  // namespace luminal::nn

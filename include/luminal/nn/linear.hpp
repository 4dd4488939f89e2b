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

    static Linear create(ParameterSet& params, Graph& cx, const std::string& prefix, std::int64_t in,
                         std::int64_t out, bool with_bias = false, DType dtype = DType::F32) {
        Linear layer{params.add(cx, prefix + ".weight", {out, in}, dtype), std::nullopt};
        if (with_bias) layer.bias = params.add(cx, prefix + ".bias", {out}, dtype);
        return layer;
    }

    GraphTensor operator()(const GraphTensor& x) const {
        GraphTensor y = x.matmul(as_f32(weight).t());
        if (bias) y = y + as_f32(*bias);
        return y;
    }

    static GraphTensor as_f32(const GraphTensor& t) { return t.dtype() == DType::F32 ? t : t.cast(DType::F32); }
};

}  // namespace luminal::nn

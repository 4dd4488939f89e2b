#pragma once
// Token embedding: rows of a [vocab, hidden] table picked by token id.
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/nn/linear.hpp"
#include "luminal/nn/parameters.hpp"

#include <string>

namespace luminal::nn {

struct Embedding {
    GraphTensor weight;  // [vocab, hidden]

    static Embedding create(ParameterSet& params, Graph& cx, const std::string& name, std::int64_t vocab,
                            std::int64_t hidden, DType dtype = DType::F32) {
        return {params.add(cx, name, {vocab, hidden}, dtype)};
    }

    // ids: [s] integer tokens -> [s, hidden] f32.
    GraphTensor operator()(const GraphTensor& ids) const { return Linear::as_f32(weight.index_select(0, ids)); }
};

}  // namespace luminal::nn

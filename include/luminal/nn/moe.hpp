#pragma once
// Mixture of experts: a router picks k of E experts per token and weights
// them; each token runs only its k experts (their weights gathered by index),
// and the outputs are summed with the router weights.
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/nn/linear.hpp"
#include "luminal/nn/mlp.hpp"

#include <cstdint>

namespace luminal::nn {

struct Routing {
    GraphTensor experts;  // [n, k] i32 expert indexes, best first
    GraphTensor weights;  // [n, k] f32
};

// Softmax over the router's scores, the top k, optionally renormalised to sum to 1.
inline Routing route_top_k(const GraphTensor& scores, std::int64_t k, bool renormalise) {
    GraphTensor probabilities = Linear::as_f32(scores).softmax(-1);
    GraphTensor experts = probabilities.topk_indexes(k, -1);
    GraphTensor weights = probabilities.gather_elements(experts, -1);
    if (renormalise) weights = weights / weights.sum(-1, true);
    return {experts, weights};
}

// Stacked expert weights in Hugging Face's per-expert [out, in] layout.
struct Experts {
    GraphTensor gate;  // [E, I, H]
    GraphTensor up;    // [E, I, H]
    GraphTensor down;  // [E, H, I]
    Activation activation = Activation::Silu;
    // ModelOptions::narrow_activations: with 16-bit experts, each product's
    // input is rounded to their dtype first, as a dense Linear's is.
    bool narrow_activations = false;

    // x: [n, H] -> [n, H], each row the routed mixture of its k experts.
    GraphTensor operator()(const GraphTensor& x, const Routing& routing) const {
        const Expression n = x.view().dim(0), k = routing.experts.view().dim(1), hidden = x.view().dim(1);
        GraphTensor picked = routing.experts.reshape({n * k});
        auto pick = [&](const GraphTensor& w) { return Linear::as_f32(w.index_select(0, picked)); };
        // Rounded before the rows are repeated per expert, so the copy the repeat needs is of 16-bit values.
        GraphTensor rows = narrowed(x, gate).unsqueeze(1).expand_dim(1, k).reshape({n * k, hidden});
        rows = Linear::as_f32(rows).unsqueeze(-1);  // [nk, H, 1]
        GraphTensor hidden_states = activate(pick(gate).matmul(rows), activation) * pick(up).matmul(rows);
        hidden_states = Linear::as_f32(narrowed(hidden_states, down));
        GraphTensor out = pick(down).matmul(hidden_states).reshape({n, k, hidden});  // [n, k, H]
        return (out * routing.weights.unsqueeze(-1)).sum(1);
    }

private:
    GraphTensor narrowed(const GraphTensor& x, const GraphTensor& w) const {
        const bool narrow = narrow_activations && (w.dtype() == DType::BF16 || w.dtype() == DType::F16);
        return narrow ? x.cast(w.dtype()) : x;
    }
};

}  // namespace luminal::nn

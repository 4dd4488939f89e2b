#pragma once
// Causal scaled-dot-product attention with grouped KV heads, over the cached
// keys of positions 0..p+s-1 for the s new queries at positions p..p+s-1.
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"

#include <cmath>
#include <cstdint>
#include <optional>

namespace luminal::nn {

struct AttentionOptions {
    double scale = 1.0;                          // multiplies the scores
    std::optional<std::int64_t> sliding_window;  // a query sees only this many latest positions
    // Queries rounded to this dtype first (a 16-bit cache under narrow activations: q times the stored keys
    // is then a product of two 16-bit values, as in a 16-bit model's attention).
    std::optional<DType> query_dtype;
};

// Bool [s, t]: true where query i (position p+i) must not see key j: j is in
// its future, or (with a window w) j <= p+i-w.
inline GraphTensor attention_mask(Graph& cx, Expression s, Expression t, Expression p,
                                  std::optional<std::int64_t> window) {
    const Expression z = Expression::index();
    const Expression query = p + z / t, key = z % t;
    Expression masked = gt(key, query);
    if (window) masked = logical_or(masked, gt(query - *window + 1, key));
    return cx.iota(masked, {s, t}).cast(DType::Bool);
}

// q: [s, heads, d], keys: [t, kv_heads, d], values: [t, kv_heads, dv] with
// t = p + s -> [s, heads * dv].
inline GraphTensor attention(const GraphTensor& q, const GraphTensor& keys, const GraphTensor& values, Expression p,
                             const AttentionOptions& options) {
    const Expression s = q.view().dim(0);
    const Expression heads = q.view().dim(1), kv_heads = keys.view().dim(1);
    const Expression group = heads / kv_heads;
    const GraphTensor rounded = options.query_dtype ? q.cast(*options.query_dtype).cast(DType::F32) : q;
    GraphTensor query = rounded.permute({1, 0, 2}).split_dims(0, group);       // [kv, group, s, d]
    GraphTensor key = keys.permute({1, 2, 0}).unsqueeze(1);                    // [kv, 1, d, t]
    GraphTensor value = values.permute({1, 0, 2}).unsqueeze(1);                // [kv, 1, t, dv]
    GraphTensor scores = query.matmul(key) * options.scale;                    // [kv, group, s, t]
    // The mask is added as a bias (0 or -inf) of one [s, t] tensor shared by the heads:
    // a select over the whole score tensor costs a gather of twice its size.
    GraphTensor mask = attention_mask(q.graph(), s, keys.view().dim(0), p, options.sliding_window);
    GraphTensor bias = where(mask, -INFINITY, 0.0f).cast(scores.dtype());
    GraphTensor weights = (scores + bias).softmax(-1);
    GraphTensor out = weights.matmul(value);                                   // [kv, group, s, dv]
    return out.merge_dims(0).permute({1, 0, 2}).merge_dims(1);                 // [s, heads * dv]
}

}  // namespace luminal::nn

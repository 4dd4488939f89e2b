#pragma once
// The attention sub-layer of a decoder block: q/k/v projections, optional
// per-head norms of q, k and v, RoPE, the KV cache, attention and the output
// projection. Which parts a layer has comes from the family and its config.
#include "luminal/io/model_config.hpp"
#include "luminal/nn/attention.hpp"
#include "luminal/nn/kv_cache.hpp"
#include "luminal/nn/linear.hpp"
#include "luminal/nn/norm.hpp"
#include "luminal/nn/rotary.hpp"

#include <optional>
#include <string>

namespace luminal::nn {

struct SelfAttentionSpec {
    std::int64_t hidden = 0, heads = 0;
    io::LayerConfig layer;
    bool bias = false;         // of the q, k and v projections
    bool output_bias = false;  // of o_proj
    // Per-head RMSNorm of q and k (Qwen3, Gemma), with Gemma 3's (1 + w) offset.
    bool qk_norm = false;
    double qk_norm_offset = 0.0;
    bool value_norm = false;  // unweighted RMSNorm of v (Gemma 4)
    bool value_is_key = false;  // no v_proj: v is the k projection (Gemma 4 global layers)
    double norm_epsilon = 1e-6;
    AttentionOptions attention;
    std::int64_t context = 0;  // KV cache capacity
    DType weight_dtype = DType::F32;
    DType kv_dtype = DType::F32;  // of the KV cache
};

struct SelfAttention {
    SelfAttentionSpec spec;
    Linear q, k, o;
    std::optional<Linear> v;
    std::optional<RmsNorm> q_norm, k_norm, v_norm;
    Rotary rope;
    std::string cache_name;

    static SelfAttention create(ParameterSet& params, Graph& cx, const std::string& prefix, const Rotary& rope,
                                const SelfAttentionSpec& spec) {
        const std::int64_t d = spec.layer.head_dim, kv = spec.layer.num_key_value_heads;
        SelfAttention a{spec,
                        Linear::create(params, cx, prefix + ".q_proj", spec.hidden, spec.heads * d, spec.bias,
                                       spec.weight_dtype),
                        Linear::create(params, cx, prefix + ".k_proj", spec.hidden, kv * d, spec.bias,
                                       spec.weight_dtype),
                        Linear::create(params, cx, prefix + ".o_proj", spec.heads * d, spec.hidden, spec.output_bias,
                                       spec.weight_dtype),
                        std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                        rope,
                        prefix + ".cache"};
        if (!spec.value_is_key)
            a.v = Linear::create(params, cx, prefix + ".v_proj", spec.hidden, kv * d, spec.bias, spec.weight_dtype);
        if (spec.qk_norm) {
            a.q_norm = RmsNorm::create(params, cx, prefix + ".q_norm.weight", d, spec.norm_epsilon, spec.qk_norm_offset);
            a.k_norm = RmsNorm::create(params, cx, prefix + ".k_norm.weight", d, spec.norm_epsilon, spec.qk_norm_offset);
        }
        if (spec.value_norm) a.v_norm = RmsNorm::unweighted(spec.norm_epsilon);
        return a;
    }

    // x: [s, hidden] of the tokens at positions p.. -> [s, hidden]; adds the layer's cache to `caches`.
    GraphTensor operator()(const GraphTensor& x, Expression p, KvCaches& caches) const {
        return attend(x, p, caches).output;
    }

    struct Attended {
        GraphTensor output;  // [s, hidden]
        CacheWindow window;  // the keys and values attended to (positions 0..p+s-1)
    };
    Attended attend(const GraphTensor& x, Expression p, KvCaches& caches) const {
        const std::int64_t d = spec.layer.head_dim;
        GraphTensor queries = q(x).split_dims(-1, d);  // [s, heads, d]
        GraphTensor keys = k(x).split_dims(-1, d);     // [s, kv, d]
        GraphTensor values = v ? (*v)(x).split_dims(-1, d) : keys;
        if (q_norm) queries = (*q_norm)(queries);
        if (k_norm) keys = (*k_norm)(keys);
        if (v_norm) values = (*v_norm)(values);
        queries = rope(queries, p);
        keys = rope(keys, p);
        CacheWindow window = append_to_cache(x.graph(), cache_name, spec.context, keys, values, p, spec.kv_dtype);
        caches.layers.push_back(window.cache);
        AttentionOptions options = spec.attention;
        if (q.narrow_activations && (spec.kv_dtype == DType::BF16 || spec.kv_dtype == DType::F16)) options.query_dtype = spec.kv_dtype;
        return {o(attention(queries, window.keys, window.values, p, options)), window};
    }
};

}  // namespace luminal::nn

#pragma once
// Qwen3: the Llama block with a per-head RMSNorm of q and k before RoPE.
#include "luminal/nn/llama.hpp"

namespace luminal::nn {

inline SelfAttentionSpec qwen3_attention_spec(const ModelBuilder& m, std::size_t i) {
    SelfAttentionSpec spec = attention_spec(m, i);
    spec.qk_norm = true;
    return spec;
}

inline CausalLm build_qwen3(const io::ModelConfig& config, const ModelOptions& options) {
    return build_decoder(config, options, DecoderSpec{},
                         [](ModelBuilder& m, RotaryTables& ropes, std::size_t i, const GraphTensor& x) {
                             return pre_norm_block(m, ropes, i, qwen3_attention_spec(m, i), x, dense_mlp(m, i));
                         });
}

}  // namespace luminal::nn

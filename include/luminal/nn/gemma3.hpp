#pragma once
// Gemma 3 (text): embeddings scaled by sqrt(hidden); "sandwich" norms around
// attention and MLP, all RMSNorms scaling by (1 + w); q/k norms; scores scaled
// by query_pre_attn_scalar^-1/2; sliding-window and global layers with their
// own RoPE; GeGLU (tanh) MLP; optional final logit softcap. The config's
// attn_logit_softcapping is a Gemma 2 leftover that transformers' Gemma 3 does
// not apply (q/k norms replaced it), so it is not applied here either.
#include "luminal/nn/llama.hpp"

#include <cmath>

namespace luminal::nn {

inline CausalLm build_gemma3(const io::ModelConfig& config, const ModelOptions& options) {
    const io::GemmaConfig& gemma = *config.gemma;
    DecoderSpec decoder{std::sqrt(static_cast<double>(config.hidden_size)), 1.0, gemma.final_logit_softcapping};
    return build_decoder(config, options, decoder, [](ModelBuilder& m, RotaryTables& ropes, std::size_t i,
                                                      const GraphTensor& x) {
        Graph& cx = m.graph;
        const std::string prefix = layer_prefix(i);
        auto norm = [&](const char* name) {
            return RmsNorm::create(m.parameters, cx, prefix + "." + name + ".weight", m.config.hidden_size,
                                   m.config.rms_norm_eps, 1.0);
        };
        SelfAttentionSpec spec = attention_spec(m, i);
        spec.qk_norm = true;
        spec.qk_norm_offset = 1.0;
        spec.attention.scale = 1.0 / std::sqrt(m.config.gemma->query_pre_attn_scalar);
        GraphTensor h = x + norm("post_attention_layernorm")(run_attention(m, ropes, i, spec,
                                                                           norm("input_layernorm")(x)));
        const GatedMlp mlp = dense_mlp(m, i);
        return h + norm("post_feedforward_layernorm")(mlp(norm("pre_feedforward_layernorm")(h)));
    });
}

}  // namespace luminal::nn

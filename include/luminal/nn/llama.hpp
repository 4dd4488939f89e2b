#pragma once
// Llama 3.x (and Llama-architecture models such as SmolLM2): pre-norm blocks,
// GQA attention with RoPE (incl. llama3 scaling), SwiGLU MLP.
#include "luminal/nn/decoder.hpp"
#include "luminal/nn/mlp.hpp"

namespace luminal::nn {

// x + attention(norm(x)), then + mlp(norm(x)); `mlp` maps the normed x.
template <typename Mlp>
GraphTensor pre_norm_block(ModelBuilder& m, RotaryTables& ropes, std::size_t i, const SelfAttentionSpec& spec,
                           const GraphTensor& x, Mlp&& mlp) {
    Graph& cx = m.graph;
    const auto eps = m.config.rms_norm_eps;
    const std::string prefix = layer_prefix(i);
    const RmsNorm attention_norm = RmsNorm::create(m.parameters, cx, prefix + ".input_layernorm.weight",
                                                   m.config.hidden_size, eps);
    GraphTensor h = x + run_attention(m, ropes, i, spec, attention_norm(x));
    const RmsNorm mlp_norm = RmsNorm::create(m.parameters, cx, prefix + ".post_attention_layernorm.weight",
                                             m.config.hidden_size, eps);
    return h + mlp(mlp_norm(h));
}

inline GatedMlp dense_mlp(ModelBuilder& m, std::size_t i) {
    return GatedMlp::create(m.parameters, m.graph, layer_prefix(i) + ".mlp", m.config.hidden_size,
                            m.config.intermediate_size, activation_named(m.config.hidden_act), m.config.mlp_bias,
                            m.options.weight_dtype);
}

inline CausalLm build_llama(const io::ModelConfig& config, const ModelOptions& options) {
    return build_decoder(config, options, DecoderSpec{},
                         [](ModelBuilder& m, RotaryTables& ropes, std::size_t i, const GraphTensor& x) {
                             return pre_norm_block(m, ropes, i, attention_spec(m, i), x, dense_mlp(m, i));
                         });
}

}  // namespace luminal::nn

#pragma once
// The skeleton the five families share: token embedding (optionally scaled),
// a stack of blocks, a final RMSNorm, the LM head (tied to the embedding or
// its own) and an optional logit softcap. A family supplies its block.
#include "luminal/nn/causal_lm.hpp"
#include "luminal/nn/embedding.hpp"
#include "luminal/nn/norm.hpp"
#include "luminal/nn/rotary.hpp"
#include "luminal/nn/self_attention.hpp"

#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace luminal::nn {

struct DecoderSpec {
    double embedding_scale = 1.0;
    double norm_offset = 0.0;  // Gemma 3's (1 + w) norms
    std::optional<double> logit_softcap;
};

// Rotary tables shared by all layers with the same RoPE and head size.
class RotaryTables {
public:
    const Rotary& get(ParameterSet& params, Graph& cx, const io::RopeConfig& rope, std::int64_t head_dim) {
        for (const auto& [key, rotary] : tables_)
            if (key.first == rope && key.second == head_dim) return rotary;
        const std::string name = fmt::format("rope.{}.inv_freq", tables_.size());
        return tables_.emplace_back(std::pair(rope, head_dim), Rotary::create(params, cx, name, rope, head_dim)).second;
    }

private:
    std::deque<std::pair<std::pair<io::RopeConfig, std::int64_t>, Rotary>> tables_;  // few: searched in order
};

// The attention settings every family starts from, for layer `i`.
inline SelfAttentionSpec attention_spec(const ModelBuilder& m, std::size_t i) {
    SelfAttentionSpec spec;
    spec.hidden = m.config.hidden_size;
    spec.heads = m.config.num_attention_heads;
    spec.layer = m.config.layers[i];
    spec.bias = m.config.attention_bias;
    spec.output_bias = m.config.attention_output_bias;
    spec.norm_epsilon = m.config.rms_norm_eps;
    spec.attention.scale = 1.0 / std::sqrt(static_cast<double>(spec.layer.head_dim));
    if (spec.layer.attention == io::AttentionKind::Sliding) spec.attention.sliding_window = m.config.sliding_window;
    spec.context = m.options.context;
    spec.weight_dtype = m.options.weight_dtype;
    spec.kv_dtype = m.options.kv_dtype;
    return spec;
}

inline std::string layer_prefix(std::size_t i) { return fmt::format("model.layers.{}", i); }

// block(builder, rotary tables, layer index, x [s, hidden]) -> x.
template <typename Block>
CausalLm build_decoder(const io::ModelConfig& config, const ModelOptions& options, const DecoderSpec& spec,
                       Block&& block) {
    check(options.context > 0, "model", "context must be positive, got {}", options.context);
    auto graph = std::make_unique<Graph>();
    ParameterSet parameters;
    parameters.quantize(options.quantized, options.q8_activations);
    parameters.narrow_activations(options.narrow_activations);
    KvCaches caches;
    ModelBuilder m{config, options, *graph, parameters, caches, std::nullopt};
    const std::int64_t vocab = config.vocab_size, hidden = config.hidden_size;
    GraphTensor input_ids = m.graph.named_tensor("input_ids", {CausalLm::new_tokens()}, DType::I32);
    m.input_ids = input_ids;
    const Embedding embed =
        Embedding::create(parameters, m.graph, "model.embed_tokens.weight", vocab, hidden, options.weight_dtype);
    GraphTensor x = embed(input_ids);
    if (spec.embedding_scale != 1.0) x = x * spec.embedding_scale;
    RotaryTables ropes;
    for (std::size_t i = 0; i < config.layers.size(); ++i) x = block(m, ropes, i, x);
    // The norm is per token, so the last token's row is taken before it, not after.
    if (options.last_logits_only) x = x.slice_along(0, CausalLm::new_tokens() - 1, CausalLm::new_tokens());
    x = RmsNorm::create(parameters, m.graph, "model.norm.weight", hidden, config.rms_norm_eps, spec.norm_offset)(x);
    const GraphTensor head = config.tie_word_embeddings
                                 ? embed.weight
                                 : parameters.add(m.graph, "lm_head.weight", {vocab, hidden}, options.weight_dtype);
    GraphTensor logits = Linear::product(x, head, options.narrow_activations);
    if (spec.logit_softcap) logits = (logits * (1.0 / *spec.logit_softcap)).tanh() * *spec.logit_softcap;
    logits = logits.output();
    std::optional<TokenSampling> sampling;
    if (options.sample_in_graph) {
        GraphTensor bias = m.graph.named_tensor("sampling.bias", {vocab});
        GraphTensor settings = m.graph.named_tensor("sampling.settings", {3});
        GraphTensor token = custom_op(SampleTokenOp{CausalLm::cached_tokens()}, {logits, bias, settings}).output();
        sampling = TokenSampling{bias, settings, token};
    }
    return CausalLm{config, options, std::move(graph), std::move(parameters), std::move(caches), input_ids, logits,
                    {}, sampling};
}

// The attention sub-layer of layer i.
inline GraphTensor run_attention(ModelBuilder& m, RotaryTables& ropes, std::size_t i, const SelfAttentionSpec& spec,
                                 const GraphTensor& x) {
    const SelfAttention attention =
        SelfAttention::create(m.parameters, m.graph, layer_prefix(i) + ".self_attn",
                              ropes.get(m.parameters, m.graph, spec.layer.rope, spec.layer.head_dim), spec);
    return attention(x, CausalLm::cached_tokens(), m.caches);
}

}  // namespace luminal::nn

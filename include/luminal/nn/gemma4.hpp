#pragma once
// Gemma 4 (text, incl. the MoE variant): Gemma 3's sandwich norms (weights
// used as they are, not 1 + w), unscaled attention scores (q and k are
// RMS-normed, v too, without a weight), global layers with their own head size
// and, with attention_k_eq_v, no v_proj (V is the K projection); a MoE block
// beside the dense MLP, routed from the block input; a learned per-layer
// output scalar. The small models add per-layer input embeddings (a second,
// per-layer signal from the token and the embedded input, gated into each
// block's output) and KV sharing (the last num_kv_shared_layers layers have no
// K/V projections and attend to the keys and values of the last earlier layer
// of their attention kind; with use_double_wide_mlp their MLP is twice as wide).
#include "luminal/nn/llama.hpp"
#include "luminal/nn/moe.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace luminal::nn {

struct Gemma4Moe {
    Linear router;
    GraphTensor router_scale;       // [hidden]
    GraphTensor per_expert_scale;   // [experts]
    Experts experts;
    std::int64_t top_k = 0;
    double epsilon = 1e-6;

    static Gemma4Moe create(ModelBuilder& m, std::size_t i) {
        Graph& cx = m.graph;
        const io::MoeConfig& moe = *m.config.moe;
        const std::string prefix = layer_prefix(i);
        const std::int64_t hidden = m.config.hidden_size, inner = moe.intermediate_size, count = moe.num_experts;
        const DType dtype = m.options.weight_dtype;
        // gate_up_proj holds each expert's gate rows, then its up rows.
        GraphTensor gate_up = m.parameters.add(cx, prefix + ".experts.gate_up_proj", {count, 2 * inner, hidden}, dtype);
        // A router's inputs stay exact: rounding them could change the experts a token picks.
        return {Linear::create(m.parameters, cx, prefix + ".router.proj", hidden, count, false, dtype).with_exact_inputs(),
                m.parameters.add(cx, prefix + ".router.scale", {hidden}),
                m.parameters.add(cx, prefix + ".router.per_expert_scale", {count}),
                Experts{gate_up.slice_along(1, 0, inner), gate_up.slice_along(1, inner, 2 * inner),
                        m.parameters.add(cx, prefix + ".experts.down_proj", {count, hidden, inner}, dtype),
                        activation_named(m.config.hidden_act), m.options.narrow_activations},
                moe.top_k, m.config.rms_norm_eps};
    }

    // router_input: the block input; expert_input: its pre-expert norm.
    GraphTensor operator()(const GraphTensor& router_input, const GraphTensor& expert_input) const {
        const double root = 1.0 / std::sqrt(static_cast<double>(router_input.view().dim(1).eval({})));
        GraphTensor scores = router(RmsNorm::unweighted(epsilon)(router_input) * router_scale * root);
        Routing routing = route_top_k(scores, top_k, true);
        routing.weights = routing.weights * per_expert_scale.gather(routing.experts);
        return experts(expert_input, routing);
    }
};

// Gemma 4's per-layer inputs, [s, layers, width]: a packed token embedding
// (scaled by sqrt(width)) plus a projection of the embedded input (scaled by
// hidden^-1/2, RMS-normed per layer), averaged with weight 1/sqrt(2) each.
inline GraphTensor gemma4_per_layer_inputs(ModelBuilder& m, const GraphTensor& embedded) {
    const io::GemmaConfig& gemma = *m.config.gemma;
    const std::int64_t layers = m.config.num_hidden_layers, width = gemma.hidden_size_per_layer_input;
    const std::int64_t hidden = m.config.hidden_size;
    const DType dtype = m.options.weight_dtype;
    const Embedding tokens = Embedding::create(m.parameters, m.graph, "model.embed_tokens_per_layer.weight",
                                               gemma.vocab_size_per_layer_input, layers * width, dtype);
    const Linear projection = Linear::create(m.parameters, m.graph, "model.per_layer_model_projection", hidden,
                                             layers * width, false, dtype);
    const RmsNorm norm = RmsNorm::create(m.parameters, m.graph, "model.per_layer_projection_norm.weight", width,
                                         m.config.rms_norm_eps);
    const GraphTensor scaled_tokens = tokens(*m.input_ids) * std::sqrt(static_cast<double>(width));
    const GraphTensor projected = projection(embedded) * (1.0 / std::sqrt(static_cast<double>(hidden)));
    GraphTensor by_token = scaled_tokens.split_dims(-1, width);
    GraphTensor by_input = norm(projected.split_dims(-1, width));
    return (by_input + by_token) * std::sqrt(0.5);
}

// The layers whose keys and values each layer attends to: itself, or for the
// last num_kv_shared_layers layers the last earlier layer of the same kind.
inline std::vector<std::size_t> gemma4_kv_sources(const io::ModelConfig& config) {
    const auto layers = config.layers.size();
    const auto first_shared = layers - static_cast<std::size_t>(config.gemma->num_kv_shared_layers);
    std::vector<std::size_t> sources(layers);
    for (std::size_t i = 0; i < layers; ++i) {
        sources[i] = i;
        if (i < first_shared) continue;
        bool found = false;
        for (std::size_t j = first_shared; j-- > 0 && !found;)
            if (config.layers[j].attention == config.layers[i].attention) {
                sources[i] = j;
                found = true;
            }
        check(found, "gemma4", "layer {} shares the keys and values of an earlier {} layer, but the {} layers before "
              "the {} shared ones have none", i, config.layers[i].attention == io::AttentionKind::Full ? "full" : "sliding",
              first_shared, config.gemma->num_kv_shared_layers);
    }
    return sources;
}

inline CausalLm build_gemma4(const io::ModelConfig& config, const ModelOptions& options) {
    const io::GemmaConfig& gemma = *config.gemma;
    const std::vector<std::size_t> kv_sources = gemma4_kv_sources(config);
    DecoderSpec decoder{std::sqrt(static_cast<double>(config.hidden_size)), 0.0, gemma.final_logit_softcapping};
    // Built while the blocks are: the per-layer inputs (at the first block) and each layer's KV window.
    std::optional<GraphTensor> per_layer_inputs;
    std::vector<std::optional<CacheWindow>> windows(config.layers.size());
    return build_decoder(config, options, decoder, [&](ModelBuilder& m, RotaryTables& ropes, std::size_t i,
                                                       const GraphTensor& x) {
        Graph& cx = m.graph;
        const std::string prefix = layer_prefix(i);
        const std::int64_t hidden = m.config.hidden_size;
        auto norm = [&](const std::string& name) {
            return RmsNorm::create(m.parameters, cx, prefix + "." + name + ".weight", hidden, m.config.rms_norm_eps);
        };
        if (gemma.hidden_size_per_layer_input > 0 && i == 0) per_layer_inputs = gemma4_per_layer_inputs(m, x);
        SelfAttentionSpec spec = attention_spec(m, i);
        spec.qk_norm = true;
        spec.value_norm = true;
        spec.value_is_key = gemma.attention_k_eq_v && spec.layer.attention == io::AttentionKind::Full;
        spec.attention.scale = 1.0;
        const Rotary& rope = ropes.get(m.parameters, cx, spec.layer.rope, spec.layer.head_dim);
        const GraphTensor attention_input = norm("input_layernorm")(x);
        GraphTensor attended = [&] {
            if (kv_sources[i] == i) {
                auto [output, window] = SelfAttention::create(m.parameters, cx, prefix + ".self_attn", rope, spec)
                                            .attend(attention_input, CausalLm::cached_tokens(), m.caches);
                windows[i] = window;
                return output;
            }
            // A KV-shared layer: its own queries over the source layer's keys and values.
            const std::int64_t d = spec.layer.head_dim;
            const Linear q = Linear::create(m.parameters, cx, prefix + ".self_attn.q_proj", hidden,
                                            spec.heads * d, spec.bias, spec.weight_dtype);
            const Linear o = Linear::create(m.parameters, cx, prefix + ".self_attn.o_proj", spec.heads * d, hidden,
                                            spec.bias, spec.weight_dtype);
            const RmsNorm q_norm = RmsNorm::create(m.parameters, cx, prefix + ".self_attn.q_norm.weight", d,
                                                   spec.norm_epsilon);
            const CacheWindow& source = *windows[kv_sources[i]];
            GraphTensor queries = rope(q_norm(q(attention_input).split_dims(-1, d)), CausalLm::cached_tokens());
            return o(attention(queries, source.keys, source.values, CausalLm::cached_tokens(), spec.attention));
        }();
        GraphTensor h = x + norm("post_attention_layernorm")(attended);
        const bool double_wide = gemma.use_double_wide_mlp && kv_sources[i] != i;
        const GatedMlp mlp = GatedMlp::create(m.parameters, cx, prefix + ".mlp", hidden,
                                              m.config.intermediate_size * (double_wide ? 2 : 1),
                                              activation_named(m.config.hidden_act), m.config.mlp_bias,
                                              m.options.weight_dtype);
        GraphTensor ffn = mlp(norm("pre_feedforward_layernorm")(h));
        if (m.config.layers[i].moe) {
            const Gemma4Moe moe = Gemma4Moe::create(m, i);
            ffn = norm("post_feedforward_layernorm_1")(ffn) +
                  norm("post_feedforward_layernorm_2")(moe(h, norm("pre_feedforward_layernorm_2")(h)));
        }
        GraphTensor out = h + norm("post_feedforward_layernorm")(ffn);
        if (per_layer_inputs) {
            const std::int64_t width = gemma.hidden_size_per_layer_input;
            const Linear gate = Linear::create(m.parameters, cx, prefix + ".per_layer_input_gate", hidden, width,
                                               false, m.options.weight_dtype);
            const Linear projection = Linear::create(m.parameters, cx, prefix + ".per_layer_projection", width,
                                                     hidden, false, m.options.weight_dtype);
            const auto layer = static_cast<std::int64_t>(i);
            GraphTensor signal = activate(gate(out), activation_named(m.config.hidden_act)) *
                                 per_layer_inputs->slice_along(1, layer, layer + 1).merge_dims(1);
            out = out + norm("post_per_layer_input_norm")(projection(signal));
        }
        return out * m.parameters.add(cx, prefix + ".layer_scalar", {1});
    });
}

}  // namespace luminal::nn

#pragma once
// Gemma 4 (text, incl. the MoE variant): Gemma 3's sandwich norms (weights
// used as they are, not 1 + w), unscaled attention scores (q and k are
// RMS-normed, v too, without a weight), global layers with their own head size
// and, with attention_k_eq_v, no v_proj (V is the K projection); a MoE block
// beside the dense MLP, routed from the block input; a learned per-layer
// output scalar. Per-layer input embeddings and KV sharing are not supported.
#include "luminal/nn/llama.hpp"
#include "luminal/nn/moe.hpp"

#include <cmath>

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
        return {Linear::create(m.parameters, cx, prefix + ".router.proj", hidden, count, false, dtype),
                m.parameters.add(cx, prefix + ".router.scale", {hidden}),
                m.parameters.add(cx, prefix + ".router.per_expert_scale", {count}),
                Experts{gate_up.slice_along(1, 0, inner), gate_up.slice_along(1, inner, 2 * inner),
                        m.parameters.add(cx, prefix + ".experts.down_proj", {count, hidden, inner}, dtype),
                        activation_named(m.config.hidden_act)},
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

inline CausalLm build_gemma4(const io::ModelConfig& config, const ModelOptions& options) {
    const io::GemmaConfig& gemma = *config.gemma;
    check(gemma.hidden_size_per_layer_input == 0, "gemma4", "per-layer input embeddings "
          "(hidden_size_per_layer_input = {}) are not supported", gemma.hidden_size_per_layer_input);
    check(gemma.num_kv_shared_layers == 0, "gemma4", "KV sharing (num_kv_shared_layers = {}) is not supported",
          gemma.num_kv_shared_layers);
    DecoderSpec decoder{std::sqrt(static_cast<double>(config.hidden_size)), 0.0, gemma.final_logit_softcapping};
    return build_decoder(config, options, decoder, [](ModelBuilder& m, RotaryTables& ropes, std::size_t i,
                                                      const GraphTensor& x) {
        Graph& cx = m.graph;
        const std::string prefix = layer_prefix(i);
        auto norm = [&](const std::string& name) {
            return RmsNorm::create(m.parameters, cx, prefix + "." + name + ".weight", m.config.hidden_size,
                                   m.config.rms_norm_eps);
        };
        SelfAttentionSpec spec = attention_spec(m, i);
        spec.qk_norm = true;
        spec.value_norm = true;
        spec.value_is_key = m.config.gemma->attention_k_eq_v && spec.layer.attention == io::AttentionKind::Full;
        spec.attention.scale = 1.0;
        GraphTensor h = x + norm("post_attention_layernorm")(run_attention(m, ropes, i, spec,
                                                                           norm("input_layernorm")(x)));
        const GatedMlp mlp = dense_mlp(m, i);
        GraphTensor ffn = mlp(norm("pre_feedforward_layernorm")(h));
        if (m.config.layers[i].moe) {
            const Gemma4Moe moe = Gemma4Moe::create(m, i);
            ffn = norm("post_feedforward_layernorm_1")(ffn) +
                  norm("post_feedforward_layernorm_2")(moe(h, norm("pre_feedforward_layernorm_2")(h)));
        }
        GraphTensor out = h + norm("post_feedforward_layernorm")(ffn);
        return out * m.parameters.add(cx, prefix + ".layer_scalar", {1});
    });
}

}  // namespace luminal::nn

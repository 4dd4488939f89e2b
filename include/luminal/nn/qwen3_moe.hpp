#pragma once
// Qwen3-MoE: Qwen3 blocks whose MLP is, on the sparse layers, a softmax
// top-k router (optionally renormalised) over per-expert SwiGLU MLPs.
#include "luminal/nn/moe.hpp"
#include "luminal/nn/qwen3.hpp"

#include <vector>

namespace luminal::nn {

struct Qwen3MoeMlp {
    Linear router;
    Experts experts;
    std::int64_t top_k = 0;
    bool renormalise = false;

    static Qwen3MoeMlp create(ModelBuilder& m, std::size_t i) {
        const io::MoeConfig& moe = *m.config.moe;
        const std::string prefix = layer_prefix(i) + ".mlp";
        // Checkpoints store each expert's projections separately; they are stacked on load.
        auto stacked = [&](const char* projection, const Dims& part) {
            std::vector<std::string> names;
            for (std::int64_t e = 0; e < moe.num_experts; ++e)
                names.push_back(fmt::format("{}.experts.{}.{}.weight", prefix, e, projection));
            return m.parameters.add_stacked(m.graph, fmt::format("{}.experts.{}", prefix, projection), names, part,
                                            m.options.weight_dtype);
        };
        const std::int64_t hidden = m.config.hidden_size, inner = moe.intermediate_size;
        // A router's inputs stay exact: rounding them could change the experts a token picks.
        return {Linear::create(m.parameters, m.graph, prefix + ".gate", hidden, moe.num_experts, false,
                               m.options.weight_dtype).with_exact_inputs(),
                Experts{stacked("gate_proj", {inner, hidden}), stacked("up_proj", {inner, hidden}),
                        stacked("down_proj", {hidden, inner}), activation_named(m.config.hidden_act),
                        m.options.narrow_activations},
                moe.top_k, moe.norm_topk_prob};
    }

    GraphTensor operator()(const GraphTensor& x) const { return experts(x, route_top_k(router(x), top_k, renormalise)); }
};

inline CausalLm build_qwen3_moe(const io::ModelConfig& config, const ModelOptions& options) {
    return build_decoder(config, options, DecoderSpec{},
                         [](ModelBuilder& m, RotaryTables& ropes, std::size_t i, const GraphTensor& x) {
                             const SelfAttentionSpec spec = qwen3_attention_spec(m, i);
                             if (m.config.layers[i].moe)
                                 return pre_norm_block(m, ropes, i, spec, x, Qwen3MoeMlp::create(m, i));
                             return pre_norm_block(m, ropes, i, spec, x, dense_mlp(m, i));
                         });
}

}  // namespace luminal::nn

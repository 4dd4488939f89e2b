#pragma once
// The least a forward step must move through memory, and compute. Bytes: each parameter read
// once (the token embedding only the rows it gathers, unless the LM head reads
// the whole table as well; a mixture of experts' stacked weights only the
// experts its tokens can choose, min(E, tokens * k) of E) and the cached keys
// and values the new tokens attend to (a sliding-window layer only its window). No plan can read less,
// so a step's bytes over this measure how close a plan comes to the memory floor.
// Flops: each new token's products with every weight matrix it meets (a
// mixture's top-k experts of its E; the LM head for the rows whose logits
// are asked for) and its attention, Q.K^T and P.V over the keys it sees
// (causal: the cached ones, the new ones up to itself, within a sliding window).
#include "luminal/nn/causal_lm.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace luminal::nn {

inline double tensor_bytes(const GraphTensor& t) {
    double n = static_cast<double>(size_of(t.dtype()));
    for (const Expression& d : t.shape()) n *= static_cast<double>(d.eval({}));
    return n;
}

// Whether parameter p is a layer's experts stacked on their first axis.
inline bool stacked_experts(const Parameter& p, const io::ModelConfig& config) {
    return config.moe && p.name.find(".experts.") != std::string::npos && !p.shape.empty() &&
           p.shape[0] == config.moe->num_experts;
}

inline double step_floor_bytes(const CausalLm& model, std::int64_t cached, std::int64_t new_tokens) {
    const io::ModelConfig& config = model.config;
    double bytes = 0;
    for (const Parameter& p : model.parameters.parameters()) {
        const double all = tensor_bytes(p.tensor);
        const bool gathered_only = p.name == "model.embed_tokens.weight" && !config.tie_word_embeddings;
        if (gathered_only) bytes += all * static_cast<double>(new_tokens) / static_cast<double>(config.vocab_size);
        else if (stacked_experts(p, config))
            bytes += all * static_cast<double>(std::min(config.moe->num_experts, new_tokens * config.moe->top_k)) /
                     static_cast<double>(config.moe->num_experts);
        else bytes += all;
    }
    const std::int64_t attended = cached + new_tokens;
    std::size_t layer = 0;
    for (const KvCache& cache : model.caches.layers) {
        std::int64_t rows = attended;
        if (layer < config.layers.size() && config.layers[layer].attention == io::AttentionKind::Sliding && config.sliding_window)
            rows = std::min(rows, *config.sliding_window);
        for (const GraphTensor& t : {cache.keys, cache.values}) {
            const double capacity = static_cast<double>(t.shape()[0].eval({}));
            bytes += tensor_bytes(t) * static_cast<double>(std::min<std::int64_t>(rows, static_cast<std::int64_t>(capacity))) / capacity;
        }
        ++layer;
    }
    return bytes;
}

inline double step_floor_flops(const CausalLm& model, std::int64_t cached, std::int64_t new_tokens) {
    const io::ModelConfig& config = model.config;
    const auto tokens = static_cast<double>(new_tokens);
    const double head_rows = model.options.last_logits_only ? 1.0 : tokens;
    double flops = 0;
    for (const Parameter& p : model.parameters.parameters()) {
        if (p.shape.size() < 2) continue;
        double elements = 1;
        for (std::int64_t d : p.shape) elements *= static_cast<double>(d);
        if (p.name == "model.embed_tokens.weight") flops += config.tie_word_embeddings ? 2 * elements * head_rows : 0.0;
        else if (p.name == "lm_head.weight") flops += 2 * elements * head_rows;
        else if (stacked_experts(p, config))
            flops += 2 * elements * static_cast<double>(config.moe->top_k) / static_cast<double>(config.moe->num_experts) * tokens;
        else flops += 2 * elements * tokens;
    }
    for (const io::LayerConfig& layer : config.layers) {
        double keys = 0;  // summed over the new tokens
        for (std::int64_t i = 1; i <= new_tokens; ++i) {
            std::int64_t seen = cached + i;
            if (layer.attention == io::AttentionKind::Sliding && config.sliding_window) seen = std::min(seen, *config.sliding_window);
            keys += static_cast<double>(seen);
        }
        flops += 2 * 2 * static_cast<double>(config.num_attention_heads) * static_cast<double>(layer.head_dim) * keys;
    }
    return flops;
}

}  // namespace luminal::nn

#pragma once
// The least a forward step must move through memory: each parameter read
// once (the token embedding only the rows it gathers, unless the LM head reads
// the whole table as well) and the cached keys and values the new tokens
// attend to (a sliding-window layer only its window). No plan can read less,
// so a step's bytes over this measure how close a plan comes to the memory floor.
#include "luminal/nn/causal_lm.hpp"

#include <algorithm>
#include <cstdint>

namespace luminal::nn {

inline double tensor_bytes(const GraphTensor& t) {
    double n = static_cast<double>(size_of(t.dtype()));
    for (const Expression& d : t.shape()) n *= static_cast<double>(d.eval({}));
    return n;
}

inline double step_floor_bytes(const CausalLm& model, std::int64_t cached, std::int64_t new_tokens) {
    const io::ModelConfig& config = model.config;
    double bytes = 0;
    for (const Parameter& p : model.parameters.parameters()) {
        const double all = tensor_bytes(p.tensor);
        const bool gathered_only = p.name == "model.embed_tokens.weight" && !config.tie_word_embeddings;
        bytes += gathered_only ? all * static_cast<double>(new_tokens) / static_cast<double>(config.vocab_size) : all;
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

}  // namespace luminal::nn

#pragma once
// The ModelConfig of a GGUF file, from its `{architecture}.*` metadata keys as
// llama.cpp's converter writes them. Supported architectures: llama (Llama 1-3
// and Llama-shaped models such as SmolLM2; Llama 3.1's RoPE scaling comes as
// the per-pair frequency divisors of tensor rope_freqs.weight), qwen2 (run as a
// Llama with q/k/v biases), qwen3, qwen3moe (which layers route follows from
// which hold a router, ffn_gate_inp; like llama.cpp, the top-k weights are
// renormalised, as every Qwen3-MoE config asks) and gemma3 (what the file does
// not say, llama.cpp fixes: see gemma3_layers).
// Whether the LM head is tied and whether attention has biases follow from
// which tensors the file holds.
#include "luminal/core/error.hpp"
#include "luminal/io/gguf.hpp"
#include "luminal/io/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace luminal::io {

namespace detail {

// Gemma 3 as llama.cpp runs it (its gemma3 model): with a sliding window, every
// layer slides but each sixth (attention.sliding_window_pattern, a period or a
// per-layer bool array, overrides that), sliding layers rotate with base
// rope.freq_base_swa (10000 when absent) and no scaling; scores scale by
// 1/sqrt(head size), except for the 62-layer 27B model, whose
// query_pre_attn_scalar is hidden / heads. Final logits are softcapped when
// final_logit_softcapping is set.
inline void gemma3_layers(const GgufMetadata& metadata, const LayerConfig& global, ModelConfig& config) {
    const std::string& where = metadata.file();
    const std::string window_key = "gemma3.attention.sliding_window";
    const std::string pattern_key = "gemma3.attention.sliding_window_pattern";
    const auto layers = static_cast<std::size_t>(config.num_hidden_layers);
    std::vector<bool> sliding(layers, false);
    const std::int64_t window = metadata.contains(window_key) ? metadata.get_integer<std::int64_t>(window_key) : 0;
    check(window >= 0, where.c_str(), "{} must not be negative, got {}", window_key, window);
    if (window > 0) {
        const GgufValue* pattern = metadata.find(pattern_key);
        if (pattern != nullptr && pattern->get_if<GgufArray>() != nullptr) {
            const auto& flags = metadata.get_array<bool>(pattern_key);
            check(flags.size() == layers, where.c_str(), "{} has {} entries for {} layers", pattern_key,
                  flags.size(), layers);
            sliding.assign(flags.begin(), flags.end());
        } else {
            const std::int64_t period = pattern ? metadata.get_integer<std::int64_t>(pattern_key) : 6;
            check(period >= 0, where.c_str(), "{} must not be negative, got {}", pattern_key, period);
            for (std::size_t i = 0; i < layers; ++i)
                sliding[i] = period == 0 || static_cast<std::int64_t>(i) % period < period - 1;
        }
    }
    LayerConfig local = global;
    local.attention = AttentionKind::Sliding;
    local.rope = RopeConfig{};
    local.rope.theta = metadata.contains("gemma3.rope.freq_base_swa") ? metadata.get_real("gemma3.rope.freq_base_swa")
                                                                     : 10000.0;
    config.layers.clear();
    for (std::size_t i = 0; i < layers; ++i) config.layers.push_back(sliding[i] ? local : global);
    if (std::find(sliding.begin(), sliding.end(), true) != sliding.end()) config.sliding_window = window;

    GemmaConfig gemma;
    gemma.query_pre_attn_scalar = config.num_hidden_layers == 62
                                      ? static_cast<double>(config.hidden_size / config.num_attention_heads)
                                      : static_cast<double>(global.head_dim);
    if (metadata.contains("gemma3.final_logit_softcapping")) {
        const double cap = metadata.get_real("gemma3.final_logit_softcapping");
        check(cap >= 0 && std::isfinite(cap), where.c_str(), "gemma3.final_logit_softcapping must be a non-negative "
              "number, got {}", cap);
        if (cap > 0) gemma.final_logit_softcapping = cap;
    }
    config.gemma = gemma;
}

}  // namespace detail

inline ModelConfig gguf_model_config(const GgufView& file) {
    const GgufMetadata& metadata = file.metadata();
    const std::string& where = metadata.file();
    const std::string architecture(metadata.get_string("general.architecture"));
    check(architecture == "llama" || architecture == "qwen2" || architecture == "qwen3" || architecture == "qwen3moe" ||
              architecture == "gemma3",
          where.c_str(), "general.architecture '{}' is not supported (luminal runs GGUF files of architectures llama, "
          "qwen2, qwen3, qwen3moe, gemma3)", architecture);
    const auto key = [&](const char* name) { return architecture + "." + name; };
    const auto size = [&](const char* name) {
        const auto value = metadata.get_integer<std::int64_t>(key(name));
        detail::check_positive(value, key(name).c_str(), where);
        return value;
    };
    ModelConfig config;
    config.family = architecture == "qwen3"      ? ModelFamily::Qwen3
                    : architecture == "qwen3moe" ? ModelFamily::Qwen3Moe
                    : architecture == "gemma3"   ? ModelFamily::Gemma3
                                                 : ModelFamily::Llama;
    config.qk_norm = config.family != ModelFamily::Llama;
    config.model_type = architecture;
    config.hidden_size = size("embedding_length");
    config.intermediate_size = size("feed_forward_length");
    config.num_hidden_layers = size("block_count");
    constexpr std::int64_t max_layers = 65536;  // per-layer state is allocated up front
    check(config.num_hidden_layers <= max_layers, where.c_str(), "{} {} exceeds {}", key("block_count"),
          config.num_hidden_layers, max_layers);
    config.num_attention_heads = size("attention.head_count");
    config.max_position_embeddings = size("context_length");
    config.rms_norm_eps = metadata.get_real(key("attention.layer_norm_rms_epsilon"));
    check(config.rms_norm_eps > 0, where.c_str(), "{} must be positive, got {}",
          key("attention.layer_norm_rms_epsilon"), config.rms_norm_eps);
    config.hidden_act = config.family == ModelFamily::Gemma3 ? "gelu_pytorch_tanh" : "silu";
    config.vocab_size = metadata.contains(key("vocab_size"))
                            ? size("vocab_size")
                            : static_cast<std::int64_t>(metadata.get<GgufArray>("tokenizer.ggml.tokens").size());
    config.tie_word_embeddings = !file.contains("output.weight");
    config.attention_bias = file.contains("blk.0.attn_q.bias");
    config.attention_output_bias = file.contains("blk.0.attn_output.bias");
    if (metadata.contains("tokenizer.ggml.bos_token_id"))
        config.bos_token_id = metadata.get_integer<std::int64_t>("tokenizer.ggml.bos_token_id");
    if (metadata.contains("tokenizer.ggml.eos_token_id"))
        config.eos_token_ids = {metadata.get_integer<std::int64_t>("tokenizer.ggml.eos_token_id")};

    LayerConfig layer;
    layer.num_key_value_heads = metadata.contains(key("attention.head_count_kv")) ? size("attention.head_count_kv")
                                                                                  : config.num_attention_heads;
    check(config.num_attention_heads % layer.num_key_value_heads == 0, where.c_str(),
          "{} {} is not a multiple of {} {}", key("attention.head_count"), config.num_attention_heads,
          key("attention.head_count_kv"), layer.num_key_value_heads);
    layer.head_dim = metadata.contains(key("attention.key_length")) ? size("attention.key_length")
                                                                    : config.hidden_size / config.num_attention_heads;
    check(layer.head_dim * config.num_attention_heads == config.hidden_size ||
              metadata.contains(key("attention.key_length")),
          where.c_str(), "{} {} is not a multiple of {} {}", key("embedding_length"), config.hidden_size,
          key("attention.head_count"), config.num_attention_heads);
    layer.rope.theta = metadata.contains(key("rope.freq_base")) ? metadata.get_real(key("rope.freq_base")) : 10000.0;
    // The converter's Q/K permutation spans whole heads, so only full rotation round-trips.
    if (metadata.contains(key("rope.dimension_count")))
        check(size("rope.dimension_count") == layer.head_dim, where.c_str(),
              "{} {} differs from the head size {} (partial rotation is not supported)", key("rope.dimension_count"),
              size("rope.dimension_count"), layer.head_dim);
    if (metadata.contains(key("rope.scaling.type"))) {
        const std::string_view scaling = metadata.get_string(key("rope.scaling.type"));
        if (scaling == "linear") {
            layer.rope.type = RopeType::Linear;
            layer.rope.factor = metadata.get_real(key("rope.scaling.factor"));
            check(layer.rope.factor > 0, where.c_str(), "{} must be positive, got {}", key("rope.scaling.factor"),
                  layer.rope.factor);
        } else {
            check(scaling == "none", where.c_str(), "{} '{}' is not supported (supported: none, linear)",
                  key("rope.scaling.type"), scaling);
        }
    }
    // Llama 3.1 files carry their RoPE scaling as per-pair frequency divisors in a tensor.
    if (const GgufTensor* factors = file.find("rope_freqs.weight")) {
        for (const float f : dequantize(*factors)) {
            check(f > 0 && std::isfinite(f), where.c_str(), "tensor 'rope_freqs.weight' holds {}, not a positive "
                  "frequency divisor", f);
            layer.rope.frequency_factors.push_back(f);
        }
        check(static_cast<std::int64_t>(layer.rope.frequency_factors.size()) * 2 == layer.head_dim, where.c_str(),
              "tensor 'rope_freqs.weight' has {} values for a head size of {} (expected one per rotated pair)",
              layer.rope.frequency_factors.size(), layer.head_dim);
    }
    config.layers.assign(static_cast<std::size_t>(config.num_hidden_layers), layer);
    if (config.family == ModelFamily::Gemma3) detail::gemma3_layers(metadata, layer, config);
    if (config.family == ModelFamily::Qwen3Moe) {
        MoeConfig experts;
        experts.num_experts = size("expert_count");
        experts.top_k = size("expert_used_count");
        experts.intermediate_size = size("expert_feed_forward_length");
        experts.norm_topk_prob = true;
        detail::check_moe(experts, key("expert_used_count").c_str(), where);
        config.moe = experts;
        for (std::size_t i = 0; i < config.layers.size(); ++i)
            config.layers[i].moe = file.contains(fmt::format("blk.{}.ffn_gate_inp.weight", i));
    }
    return config;
}

}  // namespace luminal::io

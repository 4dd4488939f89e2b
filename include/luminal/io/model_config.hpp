#pragma once
// config.json of the bundled model families, resolved to what a model builder
// needs: global sizes plus one LayerConfig per layer (attention kind, head size,
// KV heads, RoPE, MoE or dense MLP), so that the models never re-derive the
// per-family rules (sliding-window patterns, Gemma 4's global layers, Qwen3-MoE's
// sparse step). Resolution follows transformers; tests compare against it.
#include "luminal/io/json.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/io/rope_config.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace luminal::io {

enum class ModelFamily { Llama, Qwen3, Qwen3Moe, Gemma3, Gemma4 };
enum class AttentionKind { Full, Sliding };

struct LayerConfig {
    AttentionKind attention = AttentionKind::Full;
    std::int64_t head_dim = 0;
    std::int64_t num_key_value_heads = 0;
    RopeConfig rope;
    bool moe = false;  // mixture-of-experts MLP instead of (Gemma 4: beside) the dense one
};

struct MoeConfig {
    std::int64_t num_experts = 0;
    std::int64_t top_k = 0;
    std::int64_t intermediate_size = 0;
    bool norm_topk_prob = false;  // renormalise the top-k router weights to sum to 1
};

// Gemma 3 / Gemma 4 text models.
struct GemmaConfig {
    double query_pre_attn_scalar = 0;  // scores scale by its inverse square root (Gemma 3)
    std::optional<double> final_logit_softcapping;
    std::optional<double> attn_logit_softcapping;
    // Gemma 4 only:
    bool attention_k_eq_v = false;  // full-attention layers have no v_proj: V = K projection
    std::int64_t num_kv_shared_layers = 0;
    std::int64_t hidden_size_per_layer_input = 0;
    std::int64_t vocab_size_per_layer_input = 0;
    bool use_double_wide_mlp = false;
};

struct ModelConfig {
    ModelFamily family = ModelFamily::Llama;
    std::string model_type;  // of the text model, e.g. "gemma3_text" for a "gemma3" wrapper
    std::int64_t vocab_size = 0;
    std::int64_t hidden_size = 0;
    std::int64_t intermediate_size = 0;
    std::int64_t num_hidden_layers = 0;
    std::int64_t num_attention_heads = 0;
    std::int64_t max_position_embeddings = 0;
    double rms_norm_eps = 1e-6;
    std::string hidden_act;
    bool tie_word_embeddings = false;
    bool attention_bias = false;
    bool attention_output_bias = false;  // o_proj's bias; attention_bias unless a file says otherwise (Qwen2)
    bool mlp_bias = false;
    bool qk_norm = false;  // RMSNorm of each head's q and k before RoPE (Qwen3, Gemma)
    std::optional<std::int64_t> bos_token_id;
    std::vector<std::int64_t> eos_token_ids;
    std::optional<std::int64_t> sliding_window;  // set when some layer is Sliding
    std::vector<LayerConfig> layers;
    std::optional<MoeConfig> moe;
    std::optional<GemmaConfig> gemma;
};

inline const char* family_name(ModelFamily family) {
    switch (family) {
        case ModelFamily::Llama: return "llama";
        case ModelFamily::Qwen3: return "qwen3";
        case ModelFamily::Qwen3Moe: return "qwen3_moe";
        case ModelFamily::Gemma3: return "gemma3";
        case ModelFamily::Gemma4: return "gemma4";
    }
    return "?";
}

namespace detail {

using std::int64_t;

inline void check_positive(int64_t value, const char* field, const std::string& where) {
    if (value <= 0) throw Error(where, fmt::format("field '{}' must be positive, got {}", field, value));
}

// Sizes of a parsed MoE block; `top_k_field` is the family's name for k.
inline void check_moe(const MoeConfig& experts, const char* top_k_field, const std::string& where) {
    check_positive(experts.num_experts, "num_experts", where);
    check_positive(experts.top_k, top_k_field, where);
    check_positive(experts.intermediate_size, "moe_intermediate_size", where);
    if (experts.top_k > experts.num_experts)
        throw Error(where, fmt::format("{} {} exceeds num_experts {}", top_k_field, experts.top_k,
                                       experts.num_experts));
}

inline std::vector<int64_t> parse_token_ids(const Json& config, const char* key, const std::string& where) {
    const auto value = json_optional<Json>(config, key, where);
    if (!value) return {};
    if (value->is_array()) return json_required<std::vector<int64_t>>(config, key, where);
    return {json_required<int64_t>(config, key, where)};
}

// Per-layer attention kinds from `layer_types`, or from `fallback(i)` when absent.
template <typename Fallback>
std::vector<AttentionKind> parse_layer_types(const Json& config, int64_t layers, Fallback fallback,
                                             const std::string& where) {
    std::vector<AttentionKind> kinds;
    if (const auto names = json_optional<std::vector<std::string>>(config, "layer_types", where)) {
        if (static_cast<int64_t>(names->size()) != layers)
            throw Error(where, fmt::format("layer_types has {} entries for num_hidden_layers = {}",
                                           names->size(), layers));
        for (const std::string& name : *names) {
            if (name == "full_attention") kinds.push_back(AttentionKind::Full);
            else if (name == "sliding_attention") kinds.push_back(AttentionKind::Sliding);
            else throw Error(where, fmt::format("layer_types: unknown layer type '{}'", name));
        }
        return kinds;
    }
    for (int64_t i = 0; i < layers; ++i) kinds.push_back(fallback(i));
    return kinds;
}

// Sizes every family has. `defaults` holds the transformers class defaults of
// families whose published configs rely on them (Gemma); elsewhere the sizes
// are required, because a guessed width would build a wrong model silently.
inline void parse_common(const Json& config, const Json& defaults, ModelConfig& out,
                         const std::string& where) {
    auto size = [&](const char* key) {
        const auto value = defaults.contains(key) ? json_value_or<int64_t>(config, key, defaults[key].get<int64_t>(), where)
                                                  : json_required<int64_t>(config, key, where);
        check_positive(value, key, where);
        return value;
    };
    out.vocab_size = size("vocab_size");
    out.hidden_size = size("hidden_size");
    out.intermediate_size = size("intermediate_size");
    out.num_hidden_layers = size("num_hidden_layers");
    // Per-layer state is allocated up front; no real model comes near this.
    constexpr int64_t max_layers = 65536;
    if (out.num_hidden_layers > max_layers)
        throw Error(where, fmt::format("num_hidden_layers {} exceeds {}", out.num_hidden_layers, max_layers));
    out.num_attention_heads = size("num_attention_heads");
    out.max_position_embeddings = json_value_or<int64_t>(
        config, "max_position_embeddings", defaults.value("max_position_embeddings", int64_t{2048}), where);
    out.rms_norm_eps = json_value_or<double>(config, "rms_norm_eps", defaults.value("rms_norm_eps", 1e-6), where);
    out.hidden_act = json_value_or<std::string>(config, "hidden_act",
                                                defaults.value("hidden_act", std::string("silu")), where);
    // Gemma names it hidden_activation; it wins when both are present, as in transformers.
    out.hidden_act = json_value_or<std::string>(config, "hidden_activation", out.hidden_act, where);
    out.tie_word_embeddings =
        json_value_or<bool>(config, "tie_word_embeddings", defaults.value("tie_word_embeddings", false), where);
    out.attention_bias = json_value_or<bool>(config, "attention_bias", false, where);
    out.attention_output_bias = out.attention_bias;
    out.mlp_bias = json_value_or<bool>(config, "mlp_bias", false, where);
    out.bos_token_id = json_optional<int64_t>(config, "bos_token_id", where);
    if (!out.bos_token_id && defaults.contains("bos_token_id")) out.bos_token_id = defaults["bos_token_id"].get<int64_t>();
    out.eos_token_ids = parse_token_ids(config, "eos_token_id", where);
    if (out.eos_token_ids.empty() && defaults.contains("eos_token_id"))
        out.eos_token_ids = {defaults["eos_token_id"].get<int64_t>()};
    if (out.hidden_size % out.num_attention_heads != 0 && !config.contains("head_dim") &&
        !defaults.contains("head_dim"))
        throw Error(where, fmt::format("hidden_size {} is not a multiple of num_attention_heads {} and no "
                                       "head_dim is given", out.hidden_size, out.num_attention_heads));
}

inline LayerConfig uniform_layer(const Json& config, const Json& defaults, const ModelConfig& model,
                                 const std::string& where) {
    LayerConfig layer;
    layer.head_dim = json_value_or<int64_t>(
        config, "head_dim", defaults.value("head_dim", model.hidden_size / model.num_attention_heads), where);
    layer.num_key_value_heads = json_value_or<int64_t>(
        config, "num_key_value_heads", defaults.value("num_key_value_heads", model.num_attention_heads), where);
    check_positive(layer.head_dim, "head_dim", where);
    check_positive(layer.num_key_value_heads, "num_key_value_heads", where);
    if (model.num_attention_heads % layer.num_key_value_heads != 0)
        throw Error(where, fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                                       model.num_attention_heads, layer.num_key_value_heads));
    return layer;
}

inline void parse_llama(const Json& config, ModelConfig& out, const std::string& where) {
    parse_common(config, Json::object(), out, where);
    LayerConfig layer = uniform_layer(config, Json::object(), out, where);
    layer.rope = parse_rope(config, 10000.0, where);
    out.layers.assign(static_cast<std::size_t>(out.num_hidden_layers), layer);
}

// Qwen3 slides the window only from layer max_window_layers on; Qwen3-MoE
// slides every layer. Both only when use_sliding_window is set.
inline void parse_qwen3(const Json& config, ModelConfig& out, bool moe, const std::string& where) {
    parse_common(config, Json::object(), out, where);
    out.qk_norm = true;
    LayerConfig layer = uniform_layer(config, Json::object(), out, where);
    layer.rope = parse_rope(config, 10000.0, where);
    const bool sliding = json_value_or<bool>(config, "use_sliding_window", false, where);
    if (sliding) {
        out.sliding_window = json_required<int64_t>(config, "sliding_window", where);
        check_positive(*out.sliding_window, "sliding_window", where);
    }
    const int64_t max_window_layers = json_value_or<int64_t>(config, "max_window_layers", 28, where);
    const auto kinds = moe ? std::vector<AttentionKind>(static_cast<std::size_t>(out.num_hidden_layers),
                                                        sliding ? AttentionKind::Sliding : AttentionKind::Full)
                           : parse_layer_types(config, out.num_hidden_layers, [&](int64_t i) {
                                 return sliding && i >= max_window_layers ? AttentionKind::Sliding
                                                                          : AttentionKind::Full;
                             }, where);
    if (!moe && !sliding) {
        for (AttentionKind kind : kinds)
            if (kind == AttentionKind::Sliding)
                throw Error(where, "layer_types names sliding_attention but use_sliding_window is false");
    }
    std::vector<int64_t> dense_layers;
    if (moe) {
        MoeConfig experts;
        auto count = json_optional<int64_t>(config, "num_experts", where);
        if (!count) count = json_optional<int64_t>(config, "num_local_experts", where);  // transformers >= 5
        if (!count) throw Error(where, "missing required field 'num_experts'");
        experts.num_experts = *count;
        experts.top_k = json_required<int64_t>(config, "num_experts_per_tok", where);
        experts.intermediate_size = json_required<int64_t>(config, "moe_intermediate_size", where);
        experts.norm_topk_prob = json_value_or<bool>(config, "norm_topk_prob", false, where);
        check_moe(experts, "num_experts_per_tok", where);
        out.moe = experts;
        dense_layers = json_value_or<std::vector<int64_t>>(config, "mlp_only_layers", {}, where);
    }
    const int64_t sparse_step = moe ? json_value_or<int64_t>(config, "decoder_sparse_step", 1, where) : 1;
    check_positive(sparse_step, "decoder_sparse_step", where);
    for (int64_t i = 0; i < out.num_hidden_layers; ++i) {
        LayerConfig l = layer;
        l.attention = kinds[static_cast<std::size_t>(i)];
        l.moe = moe && std::find(dense_layers.begin(), dense_layers.end(), i) == dense_layers.end() &&
                (i + 1) % sparse_step == 0;
        out.layers.push_back(l);
    }
}

// Gemma's RoPE differs by layer type: `rope_parameters` keyed by layer type
// (transformers >= 5), or the old rope_theta/rope_scaling for full-attention
// layers and rope_local_base_freq for sliding ones.
inline void gemma_ropes(const Json& config, const Json& defaults, bool gemma4, RopeConfig& full,
                        RopeConfig& sliding, const std::string& where) {
    const Json& rope_defaults = defaults["rope_parameters"];
    auto parameters = json_optional<Json>(config, "rope_parameters", where);
    // Gemma 4 has no old layout: without rope_parameters, transformers uses its defaults.
    if (!parameters && gemma4) parameters = rope_defaults;
    if (parameters && (parameters->contains("full_attention") || parameters->contains("sliding_attention"))) {
        const Json full_json = parameters->value("full_attention", rope_defaults["full_attention"]);
        const Json sliding_json = parameters->value("sliding_attention", rope_defaults["sliding_attention"]);
        full = detail::parse_rope_object(full_json, RopeConfig{}, where + ": rope_parameters.full_attention");
        sliding = detail::parse_rope_object(sliding_json, RopeConfig{},
                                            where + ": rope_parameters.sliding_attention");
        return;
    }
    full = parse_rope(config, rope_defaults["full_attention"]["rope_theta"].get<double>(), where);
    sliding.theta = json_value_or<double>(config, "rope_local_base_freq",
                                          rope_defaults["sliding_attention"]["rope_theta"].get<double>(), where);
}

// transformers' Gemma3TextConfig / Gemma4TextConfig defaults: published
// checkpoints (gemma-3-4b-it's text_config, for one) leave most sizes to them.
inline const Json& gemma3_defaults() {
    static const Json defaults = {
        {"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
        {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
        {"head_dim", 256}, {"hidden_act", "gelu_pytorch_tanh"}, {"max_position_embeddings", 131072},
        {"rms_norm_eps", 1e-6}, {"bos_token_id", 2}, {"eos_token_id", 1}, {"tie_word_embeddings", true},
        {"sliding_window", 4096}, {"query_pre_attn_scalar", 256},
        {"rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                             {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}}};
    return defaults;
}

inline const Json& gemma4_defaults() {
    static const Json defaults = {
        {"vocab_size", 262144}, {"hidden_size", 2304}, {"intermediate_size", 9216},
        {"num_hidden_layers", 30}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
        {"head_dim", 256}, {"hidden_act", "gelu_pytorch_tanh"}, {"max_position_embeddings", 131072},
        {"rms_norm_eps", 1e-6}, {"bos_token_id", 2}, {"eos_token_id", 1}, {"tie_word_embeddings", true},
        {"sliding_window", 512}, {"global_head_dim", 512},
        {"hidden_size_per_layer_input", 256}, {"vocab_size_per_layer_input", 262144},
        {"rope_parameters",
         {{"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}},
          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}}};
    return defaults;
}

inline void parse_gemma(const Json& config, ModelConfig& out, bool gemma4, const std::string& where) {
    const Json& defaults = gemma4 ? gemma4_defaults() : gemma3_defaults();
    parse_common(config, defaults, out, where);
    out.qk_norm = true;
    const LayerConfig layer = uniform_layer(config, defaults, out, where);
    RopeConfig full_rope, sliding_rope;
    gemma_ropes(config, defaults, gemma4, full_rope, sliding_rope, where);
    out.sliding_window = json_value_or<int64_t>(config, "sliding_window", defaults["sliding_window"].get<int64_t>(), where);
    check_positive(*out.sliding_window, "sliding_window", where);
    // Every sixth layer attends globally unless layer_types says otherwise.
    const int64_t pattern = json_value_or<int64_t>(config, "sliding_window_pattern", 6, where);
    check_positive(pattern, "sliding_window_pattern", where);
    auto kinds = parse_layer_types(config, out.num_hidden_layers, [&](int64_t i) {
        return (i + 1) % pattern != 0 ? AttentionKind::Sliding : AttentionKind::Full;
    }, where);
    // Gemma 4 forces a global last layer (transformers warns and overrides).
    if (gemma4) kinds.back() = AttentionKind::Full;

    GemmaConfig gemma;
    gemma.final_logit_softcapping = json_optional<double>(config, "final_logit_softcapping", where);
    gemma.attn_logit_softcapping = json_optional<double>(config, "attn_logit_softcapping", where);
    LayerConfig global_layer = layer;
    if (gemma4) {
        if (json_value_or<std::string>(config, "use_bidirectional_attention", "", where) == "all")
            throw Error(where, "use_bidirectional_attention = \"all\" (an encoder) is not a causal language model");
        gemma.attention_k_eq_v = json_value_or<bool>(config, "attention_k_eq_v", false, where);
        gemma.num_kv_shared_layers = json_value_or<int64_t>(config, "num_kv_shared_layers", 0, where);
        gemma.hidden_size_per_layer_input = json_value_or<int64_t>(
            config, "hidden_size_per_layer_input", defaults["hidden_size_per_layer_input"].get<int64_t>(), where);
        gemma.vocab_size_per_layer_input = json_value_or<int64_t>(
            config, "vocab_size_per_layer_input", defaults["vocab_size_per_layer_input"].get<int64_t>(), where);
        gemma.use_double_wide_mlp = json_value_or<bool>(config, "use_double_wide_mlp", false, where);
        if (gemma.num_kv_shared_layers < 0 || gemma.num_kv_shared_layers > out.num_hidden_layers)
            throw Error(where, fmt::format("num_kv_shared_layers {} is outside [0, {}]",
                                           gemma.num_kv_shared_layers, out.num_hidden_layers));
        // Global layers: head size global_head_dim and, when K doubles as V,
        // num_global_key_value_heads KV heads.
        global_layer.head_dim = json_value_or<int64_t>(config, "global_head_dim", defaults["global_head_dim"].get<int64_t>(), where);
        if (gemma.attention_k_eq_v)
            global_layer.num_key_value_heads =
                json_value_or<int64_t>(config, "num_global_key_value_heads", layer.num_key_value_heads, where);
        if (json_value_or<bool>(config, "enable_moe_block", false, where)) {
            MoeConfig experts;
            experts.num_experts = json_required<int64_t>(config, "num_experts", where);
            experts.top_k = json_required<int64_t>(config, "top_k_experts", where);
            experts.intermediate_size = json_required<int64_t>(config, "moe_intermediate_size", where);
            experts.norm_topk_prob = true;  // Gemma 4's router always renormalises
            check_moe(experts, "top_k_experts", where);
            out.moe = experts;
        }
    } else {
        gemma.query_pre_attn_scalar =
            json_value_or<double>(config, "query_pre_attn_scalar", defaults["query_pre_attn_scalar"].get<double>(), where);
    }
    out.gemma = gemma;

    const Json per_layer = json_value_or<Json>(config, "per_layer_config", Json::object(), where);
    for (int64_t i = 0; i < out.num_hidden_layers; ++i) {
        const AttentionKind kind = kinds[static_cast<std::size_t>(i)];
        LayerConfig l = gemma4 && kind == AttentionKind::Full ? global_layer : layer;
        l.attention = kind;
        l.rope = kind == AttentionKind::Full ? full_rope : sliding_rope;
        l.moe = out.moe.has_value();
        // transformers >= 5 writes the global layers' sizes per layer index.
        if (const auto overrides = per_layer.find(std::to_string(i)); overrides != per_layer.end()) {
            const std::string layer_where = fmt::format("{}: per_layer_config.{}", where, i);
            l.head_dim = json_value_or<int64_t>(*overrides, "head_dim", l.head_dim, layer_where);
            l.num_key_value_heads =
                json_value_or<int64_t>(*overrides, "num_key_value_heads", l.num_key_value_heads, layer_where);
        }
        check_positive(l.head_dim, "head_dim", where);
        check_positive(l.num_key_value_heads, "num_key_value_heads", where);
        out.layers.push_back(l);
    }
}

}  // namespace detail

// Parses a config.json document. Multimodal wrappers (gemma3, gemma4, or any
// config with text_config) yield their text model; the wrapper's eos_token_id
// and tie_word_embeddings take precedence, as in transformers, and a gemma3
// wrapper drops final_logit_softcapping, which its transformers class ignores.
inline ModelConfig parse_model_config(const Json& root, const std::string& where) {
    if (!root.is_object()) throw Error(where, fmt::format("config must be a JSON object, got {}", root.type_name()));
    const auto text_config = json_optional<Json>(root, "text_config", where);
    const Json& config = text_config ? *text_config : root;
    const std::string config_where = text_config ? where + ": text_config" : where;
    if (!config.is_object())
        throw Error(where, fmt::format("text_config must be a JSON object, got {}", config.type_name()));

    std::string model_type = json_optional<std::string>(config, "model_type", config_where).value_or("");
    if (model_type.empty()) model_type = json_required<std::string>(root, "model_type", where);
    if (model_type == "gemma3") model_type = "gemma3_text";
    if (model_type == "gemma4") model_type = "gemma4_text";

    ModelConfig out;
    out.model_type = model_type;
    if (model_type == "llama") {
        out.family = ModelFamily::Llama;
        detail::parse_llama(config, out, config_where);
    } else if (model_type == "qwen3") {
        out.family = ModelFamily::Qwen3;
        detail::parse_qwen3(config, out, false, config_where);
    } else if (model_type == "qwen3_moe") {
        out.family = ModelFamily::Qwen3Moe;
        detail::parse_qwen3(config, out, true, config_where);
    } else if (model_type == "gemma3_text") {
        out.family = ModelFamily::Gemma3;
        detail::parse_gemma(config, out, false, config_where);
    } else if (model_type == "gemma4_text") {
        out.family = ModelFamily::Gemma4;
        detail::parse_gemma(config, out, true, config_where);
    } else {
        throw Error(where, fmt::format("model_type '{}' is not supported (supported: llama, qwen3, qwen3_moe, "
                                       "gemma3, gemma3_text, gemma4, gemma4_text)", model_type));
    }
    if (text_config) {
        if (auto eos = detail::parse_token_ids(root, "eos_token_id", where); !eos.empty())
            out.eos_token_ids = std::move(eos);
        out.tie_word_embeddings = json_value_or<bool>(root, "tie_word_embeddings", out.tie_word_embeddings, where);
        // transformers' Gemma3ForConditionalGeneration never softcaps its logits
        // (only Gemma3ForCausalLM reads final_logit_softcapping); Gemma 4's does.
        if (out.gemma && json_optional<std::string>(root, "model_type", where) == "gemma3")
            out.gemma->final_logit_softcapping.reset();
    }
    if (std::none_of(out.layers.begin(), out.layers.end(),
                     [](const LayerConfig& l) { return l.attention == AttentionKind::Sliding; }))
        out.sliding_window.reset();
    return out;
}

// Reads `path`: a config.json file or a model directory holding one.
inline ModelConfig load_model_config(const std::filesystem::path& path) {
    const auto file = std::filesystem::is_directory(path) ? path / "config.json" : path;
    if (!std::filesystem::exists(file)) throw Error(file.string(), "no such file (expected a model's config.json)");
    return parse_model_config(parse_json(read_text_file(file), file.string()), file.string());
}

}  // namespace luminal::io

#pragma once
// RoPE parameters from config.json in either layout Hugging Face has used:
// the old `rope_theta` + `rope_scaling` pair and the newer `rope_parameters`
// object (transformers >= 5), which Gemma configs key by layer type. Defaults
// follow transformers' standardize_rope_params and rope_init_fns.
#include "luminal/io/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace luminal::io {

enum class RopeType { Default, Linear, Llama3, Proportional, Yarn, Dynamic, LongRope };

struct RopeConfig {
    RopeType type = RopeType::Default;
    double theta = 10000.0;
    // Fraction of each head's dimensions that rotate (the rest pass through).
    double partial_rotary_factor = 1.0;
    // Linear, Proportional: frequencies divided by it; Llama3: long-wavelength
    // scale; Yarn: interpolation factor; Dynamic: NTK growth rate; LongRope: the
    // context extension its default attention factor comes from.
    double factor = 1.0;
    double low_freq_factor = 1.0;                    // Llama3
    double high_freq_factor = 4.0;                   // Llama3
    // Llama3, Yarn, LongRope: the pretraining context.
    std::int64_t original_max_position_embeddings = 0;
    // Dynamic: the base grows once a sequence passes this (the config's max_position_embeddings).
    std::int64_t max_position_embeddings = 0;
    // Yarn, LongRope: multiplies cos and sin (nullopt: derived from the factor, as transformers does).
    std::optional<double> attention_factor;
    double beta_fast = 32.0, beta_slow = 1.0;        // Yarn: rotation counts bounding the ramp
    std::optional<double> mscale, mscale_all_dim;    // Yarn (DeepSeek): the attention factor's ratio
    bool truncate = true;                            // Yarn: round the ramp bounds outward
    std::vector<double> short_factor, long_factor;   // LongRope: per-pair divisors within / past the context
    // Divisors of each pair's frequency on top of the type's (a GGUF file's rope_freqs tensor).
    std::vector<double> frequency_factors;

    bool operator==(const RopeConfig&) const = default;
};

inline const char* rope_type_name(RopeType type) {
    switch (type) {
        case RopeType::Default: return "default";
        case RopeType::Linear: return "linear";
        case RopeType::Llama3: return "llama3";
        case RopeType::Proportional: return "proportional";
        case RopeType::Yarn: return "yarn";
        case RopeType::Dynamic: return "dynamic";
        case RopeType::LongRope: return "longrope";
    }
    return "?";
}

namespace detail {

inline RopeType parse_rope_type(const std::string& name, const std::string& where) {
    if (name == "default") return RopeType::Default;
    if (name == "linear") return RopeType::Linear;
    if (name == "llama3") return RopeType::Llama3;
    // Gemma 4: the first partial_rotary_factor of the pairs rotate with frequencies
    // of the full head size; the rest have frequency 0. (Default with a partial
    // factor instead spreads the frequencies over the rotated part only.)
    if (name == "proportional") return RopeType::Proportional;
    if (name == "yarn") return RopeType::Yarn;
    if (name == "dynamic") return RopeType::Dynamic;
    if (name == "longrope") return RopeType::LongRope;
    throw Error(where, fmt::format("rope_type '{}' is not supported (supported: default, linear, llama3, "
                                   "proportional, yarn, dynamic, longrope)", name));
}

// One RoPE description: an object with rope_type (or the older key `type`),
// rope_theta and the type's own fields. `base` supplies what the object omits;
// its max_position_embeddings and original_max_position_embeddings are the
// model config's (0 when it has none).
inline RopeConfig parse_rope_object(const Json& object, RopeConfig base, const std::string& where) {
    auto type_name = json_optional<std::string>(object, "rope_type", where);
    if (!type_name) type_name = json_optional<std::string>(object, "type", where);
    RopeConfig rope = base;
    rope.type = type_name ? parse_rope_type(*type_name, where) : RopeType::Default;
    rope.theta = json_value_or<double>(object, "rope_theta", base.theta, where);
    rope.partial_rotary_factor =
        json_value_or<double>(object, "partial_rotary_factor", base.partial_rotary_factor, where);
    // The pretraining context of the scaled types: a model-level field wins (Phi-3
    // writes it there), then the object's, then max_position_embeddings.
    if (rope.type == RopeType::Yarn || rope.type == RopeType::LongRope) {
        if (base.original_max_position_embeddings == 0)
            rope.original_max_position_embeddings = json_value_or<std::int64_t>(
                object, "original_max_position_embeddings", base.max_position_embeddings, where);
        check(rope.original_max_position_embeddings > 0, where.c_str(),
              "rope {}: original_max_position_embeddings must be positive, got {}", *type_name,
              rope.original_max_position_embeddings);
        // Without a factor, the ratio of the context to the pretraining context.
        const auto factor = json_optional<double>(object, "factor", where);
        rope.factor = factor ? *factor
                             : static_cast<double>(base.max_position_embeddings) /
                                   static_cast<double>(rope.original_max_position_embeddings);
        rope.attention_factor = json_optional<double>(object, "attention_factor", where);
        if (rope.attention_factor)
            check(*rope.attention_factor > 0, where.c_str(), "rope attention_factor must be positive, got {}",
                  *rope.attention_factor);
    }
    if (rope.type == RopeType::Linear || rope.type == RopeType::Llama3 || rope.type == RopeType::Dynamic)
        rope.factor = json_required<double>(object, "factor", where);
    if (rope.type == RopeType::Proportional) rope.factor = json_value_or<double>(object, "factor", 1.0, where);
    if (rope.type == RopeType::Llama3) {
        rope.low_freq_factor = json_required<double>(object, "low_freq_factor", where);
        rope.high_freq_factor = json_required<double>(object, "high_freq_factor", where);
        rope.original_max_position_embeddings =
            json_required<std::int64_t>(object, "original_max_position_embeddings", where);
        check(rope.high_freq_factor != rope.low_freq_factor, where.c_str(),
              "rope llama3: high_freq_factor equals low_freq_factor ({})", rope.low_freq_factor);
    }
    if (rope.type == RopeType::Yarn) {
        // transformers reads `x or default`: a null or zero beta takes the default.
        const auto beta_fast = json_optional<double>(object, "beta_fast", where);
        const auto beta_slow = json_optional<double>(object, "beta_slow", where);
        rope.beta_fast = beta_fast && *beta_fast != 0 ? *beta_fast : 32.0;
        rope.beta_slow = beta_slow && *beta_slow != 0 ? *beta_slow : 1.0;
        rope.mscale = json_optional<double>(object, "mscale", where);
        rope.mscale_all_dim = json_optional<double>(object, "mscale_all_dim", where);
        rope.truncate = json_value_or<bool>(object, "truncate", true, where);
    }
    if (rope.type == RopeType::Dynamic) {
        check(base.max_position_embeddings > 0, where.c_str(),
              "rope dynamic needs the model's max_position_embeddings");
        rope.max_position_embeddings = base.max_position_embeddings;
    }
    if (rope.type == RopeType::LongRope) {
        rope.short_factor = json_required<std::vector<double>>(object, "short_factor", where);
        rope.long_factor = json_required<std::vector<double>>(object, "long_factor", where);
        check(rope.short_factor.size() == rope.long_factor.size(), where.c_str(),
              "rope longrope: short_factor has {} entries, long_factor {}", rope.short_factor.size(),
              rope.long_factor.size());
        for (const double f : rope.short_factor) check(f > 0, where.c_str(), "rope short_factor {} is not positive", f);
        for (const double f : rope.long_factor) check(f > 0, where.c_str(), "rope long_factor {} is not positive", f);
    }
    check(rope.theta > 0, where.c_str(), "rope_theta must be positive, got {}", rope.theta);
    check(rope.factor > 0, where.c_str(), "rope factor must be positive, got {}", rope.factor);
    check(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1, where.c_str(),
          "partial_rotary_factor must be in (0, 1], got {}", rope.partial_rotary_factor);
    // Only the types that read them keep the model's sizes, so equal RoPEs compare equal.
    if (rope.type != RopeType::Dynamic) rope.max_position_embeddings = 0;
    if (rope.type != RopeType::Llama3 && rope.type != RopeType::Yarn && rope.type != RopeType::LongRope)
        rope.original_max_position_embeddings = 0;
    return rope;
}

}  // namespace detail

// The RoPE of a model with one RoPE for all layers. `default_theta` is the
// family's rope_theta when the config names none.
inline RopeConfig parse_rope(const Json& config, double default_theta, const std::string& where) {
    RopeConfig base;
    base.theta = default_theta;
    base.partial_rotary_factor = json_value_or<double>(config, "partial_rotary_factor", 1.0, where);
    base.max_position_embeddings = json_value_or<std::int64_t>(config, "max_position_embeddings", 0, where);
    base.original_max_position_embeddings =
        json_value_or<std::int64_t>(config, "original_max_position_embeddings", 0, where);
    if (const auto parameters = json_optional<Json>(config, "rope_parameters", where))
        return detail::parse_rope_object(*parameters, base, where + ": rope_parameters");
    base.theta = json_value_or<double>(config, "rope_theta", default_theta, where);
    if (const auto scaling = json_optional<Json>(config, "rope_scaling", where))
        return detail::parse_rope_object(*scaling, base, where + ": rope_scaling");
    return detail::parse_rope_object(Json::object(), base, where);
}

}  // namespace luminal::io

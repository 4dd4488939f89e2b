#pragma once
// RoPE parameters from config.json in either layout Hugging Face has used:
// the old `rope_theta` + `rope_scaling` pair and the newer `rope_parameters`
// object (transformers >= 5), which Gemma configs key by layer type.
#include "luminal/io/json.hpp"

#include <cstdint>
#include <string>

namespace luminal::io {

enum class RopeType { Default, Linear, Llama3, Proportional };

struct RopeConfig {
    RopeType type = RopeType::Default;
    double theta = 10000.0;
    // Fraction of each head's dimensions that rotate (the rest pass through).
    double partial_rotary_factor = 1.0;
    // Linear, Proportional: frequencies divided by it; Llama3: long-wavelength scale.
    double factor = 1.0;
    double low_freq_factor = 1.0;                    // Llama3
    double high_freq_factor = 4.0;                   // Llama3
    std::int64_t original_max_position_embeddings = 0;  // Llama3

    bool operator==(const RopeConfig&) const = default;
};

inline const char* rope_type_name(RopeType type) {
    switch (type) {
        case RopeType::Default: return "default";
        case RopeType::Linear: return "linear";
        case RopeType::Llama3: return "llama3";
        case RopeType::Proportional: return "proportional";
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
    throw Error(where, fmt::format("rope_type '{}' is not supported (supported: default, linear, "
                                   "llama3, proportional)", name));
}

// One RoPE description: an object with rope_type (or the older key `type`),
// rope_theta and the type's own fields. `base` supplies what the object omits.
inline RopeConfig parse_rope_object(const Json& object, RopeConfig base, const std::string& where) {
    auto type_name = json_optional<std::string>(object, "rope_type", where);
    if (!type_name) type_name = json_optional<std::string>(object, "type", where);
    RopeConfig rope = base;
    rope.type = type_name ? parse_rope_type(*type_name, where) : RopeType::Default;
    rope.theta = json_value_or<double>(object, "rope_theta", base.theta, where);
    rope.partial_rotary_factor =
        json_value_or<double>(object, "partial_rotary_factor", base.partial_rotary_factor, where);
    if (rope.type == RopeType::Linear || rope.type == RopeType::Llama3)
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
    check(rope.theta > 0, where.c_str(), "rope_theta must be positive, got {}", rope.theta);
    check(rope.factor > 0, where.c_str(), "rope factor must be positive, got {}", rope.factor);
    check(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1, where.c_str(),
          "partial_rotary_factor must be in (0, 1], got {}", rope.partial_rotary_factor);
    return rope;
}

}  // namespace detail

// The RoPE of a model with one RoPE for all layers. `default_theta` is the
// family's rope_theta when the config names none.
inline RopeConfig parse_rope(const Json& config, double default_theta, const std::string& where) {
    RopeConfig base;
    base.theta = default_theta;
    base.partial_rotary_factor = json_value_or<double>(config, "partial_rotary_factor", 1.0, where);
    if (const auto parameters = json_optional<Json>(config, "rope_parameters", where))
        return detail::parse_rope_object(*parameters, base, where + ": rope_parameters");
    base.theta = json_value_or<double>(config, "rope_theta", default_theta, where);
    if (const auto scaling = json_optional<Json>(config, "rope_scaling", where))
        return detail::parse_rope_object(*scaling, base, where + ": rope_scaling");
    return detail::parse_rope_object(Json::object(), base, where);
}

}  // namespace luminal::io

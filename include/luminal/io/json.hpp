#pragma once
// JSON through nlohmann::json, plus typed field access whose errors name the
// file, the field, the expected type and what was found instead.
#include "luminal/core/error.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io {

using Json = nlohmann::json;

// Parses `text`; `where` names the source (a path) in the error.
inline Json parse_json(std::string_view text, const std::string& where) {
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const Json::parse_error& error) {
        throw Error(where, fmt::format("not valid JSON (byte {}): {}", error.byte, error.what()));
    } catch (const Json::exception& error) {  // e.g. out_of_range: a number too large for a double
        throw Error(where, fmt::format("not valid JSON: {}", error.what()));
    }
}

// `value` as compact JSON, cut to a length that fits in an error message.
inline std::string json_excerpt(const Json& value) {
    std::string shown = value.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    return shown;
}

namespace detail {

template <typename T>
struct JsonType;

template <std::integral T>
    requires(!std::same_as<T, bool>)
struct JsonType<T> {
    static constexpr const char* name = "an integer";
    static std::optional<T> get(const Json& value) {
        if (value.is_number_unsigned()) {
            const auto v = value.get<std::uint64_t>();
            if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
            return static_cast<T>(v);
        }
        if (value.is_number_integer()) {
            const auto v = value.get<std::int64_t>();
            if constexpr (std::is_signed_v<T>) {
                if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return std::nullopt;
            } else {
                if (v < 0 || static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) return std::nullopt;
            }
            return static_cast<T>(v);
        }
        // 1.0 in a config is still the integer 1; 1.5 is not.
        if (value.is_number_float()) {
            // Range first: converting an out-of-range double to an integer is undefined.
            const double v = value.get<double>();
            if (v >= static_cast<double>(std::numeric_limits<T>::min()) &&
                v < std::ldexp(1.0, std::numeric_limits<T>::digits) && v == std::trunc(v))
                return static_cast<T>(v);
        }
        return std::nullopt;
    }
};

template <std::floating_point T>
struct JsonType<T> {
    static constexpr const char* name = "a number";
    static std::optional<T> get(const Json& value) {
        if (!value.is_number()) return std::nullopt;
        return value.get<T>();
    }
};

template <>
struct JsonType<bool> {
    static constexpr const char* name = "a boolean";
    static std::optional<bool> get(const Json& value) {
        if (!value.is_boolean()) return std::nullopt;
        return value.get<bool>();
    }
};

template <>
struct JsonType<std::string> {
    static constexpr const char* name = "a string";
    static std::optional<std::string> get(const Json& value) {
        if (!value.is_string()) return std::nullopt;
        return value.get<std::string>();
    }
};

template <>
struct JsonType<Json> {
    static constexpr const char* name = "a value";
    static std::optional<Json> get(const Json& value) { return value; }
};

template <typename T>
struct JsonType<std::vector<T>> {
    static constexpr const char* name = "an array";
    static std::optional<std::vector<T>> get(const Json& value) {
        if (!value.is_array()) return std::nullopt;
        std::vector<T> out;
        out.reserve(value.size());
        for (const Json& element : value) {
            auto converted = JsonType<T>::get(element);
            if (!converted) return std::nullopt;
            out.push_back(std::move(*converted));
        }
        return out;
    }
};

template <typename T>
T convert_field(const Json& value, std::string_view key, const std::string& where) {
    auto converted = JsonType<T>::get(value);
    if (!converted) {
        throw Error(where, fmt::format("field '{}' must be {}{}, got {} {}", key, JsonType<T>::name,
                                       std::integral<T> && !std::same_as<T, bool> ? " in range" : "",
                                       value.type_name(), json_excerpt(value)));
    }
    return std::move(*converted);
}

inline void require_object(const Json& object, std::string_view key, const std::string& where) {
    if (!object.is_object())
        throw Error(where, fmt::format("expected an object holding '{}', got {}", key, object.type_name()));
}

}  // namespace detail

// object[key] as T; missing, null or of another type -> Error naming the field.
template <typename T>
T json_required(const Json& object, std::string_view key, const std::string& where) {
    detail::require_object(object, key, where);
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        throw Error(where, fmt::format("missing required field '{}'", key));
    return detail::convert_field<T>(*it, key, where);
}

// object[key] as T, or nullopt when missing or null; another type -> Error.
template <typename T>
std::optional<T> json_optional(const Json& object, std::string_view key, const std::string& where) {
    detail::require_object(object, key, where);
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return std::nullopt;
    return detail::convert_field<T>(*it, key, where);
}

template <typename T>
T json_value_or(const Json& object, std::string_view key, T fallback, const std::string& where) {
    auto value = json_optional<T>(object, key, where);
    return value ? std::move(*value) : std::move(fallback);
}

}  // namespace luminal::io

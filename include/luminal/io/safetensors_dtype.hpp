#pragma once
// The element types a safetensors file may declare, as the format names them,
// their sizes in bits, and the luminal DType each maps to (where there is one).
// Files holding types luminal cannot compute with (F64, I8, FP8, ...) still open;
// only converting such a tensor fails.
#include "luminal/core/dtype.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace luminal::io {

enum class SafetensorsDType : std::uint8_t {
    BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
    I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64,
};

namespace detail {

struct SafetensorsDTypeInfo {
    SafetensorsDType dtype;
    std::string_view name;
    std::uint32_t bits;  // F4 and F6 pack several elements per byte
    std::optional<DType> luminal;
};

inline constexpr std::array<SafetensorsDTypeInfo, 22> safetensors_dtypes{{
    {SafetensorsDType::BOOL, "BOOL", 8, DType::Bool},
    {SafetensorsDType::F4, "F4", 4, std::nullopt},
    {SafetensorsDType::F6_E2M3, "F6_E2M3", 6, std::nullopt},
    {SafetensorsDType::F6_E3M2, "F6_E3M2", 6, std::nullopt},
    {SafetensorsDType::U8, "U8", 8, DType::U8},
    {SafetensorsDType::I8, "I8", 8, std::nullopt},
    {SafetensorsDType::F8_E5M2, "F8_E5M2", 8, std::nullopt},
    {SafetensorsDType::F8_E4M3, "F8_E4M3", 8, std::nullopt},
    {SafetensorsDType::F8_E8M0, "F8_E8M0", 8, std::nullopt},
    {SafetensorsDType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, std::nullopt},
    {SafetensorsDType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, std::nullopt},
    {SafetensorsDType::I16, "I16", 16, std::nullopt},
    {SafetensorsDType::U16, "U16", 16, std::nullopt},
    {SafetensorsDType::F16, "F16", 16, DType::F16},
    {SafetensorsDType::BF16, "BF16", 16, DType::BF16},
    {SafetensorsDType::I32, "I32", 32, DType::I32},
    {SafetensorsDType::U32, "U32", 32, std::nullopt},
    {SafetensorsDType::F32, "F32", 32, DType::F32},
    {SafetensorsDType::C64, "C64", 64, std::nullopt},
    {SafetensorsDType::F64, "F64", 64, std::nullopt},
    {SafetensorsDType::I64, "I64", 64, DType::I64},
    {SafetensorsDType::U64, "U64", 64, std::nullopt},
}};

// info_of indexes the table by the enum's value.
static_assert([] {
    for (std::size_t i = 0; i < safetensors_dtypes.size(); ++i)
        if (static_cast<std::size_t>(safetensors_dtypes[i].dtype) != i) return false;
    return true;
}());

constexpr const SafetensorsDTypeInfo& info_of(SafetensorsDType dtype) {
    return safetensors_dtypes[static_cast<std::size_t>(dtype)];
}

}  // namespace detail

constexpr std::string_view name_of(SafetensorsDType dtype) { return detail::info_of(dtype).name; }
constexpr std::uint32_t bits_of(SafetensorsDType dtype) { return detail::info_of(dtype).bits; }

// The luminal dtype holding this type's values unchanged, if luminal has one.
constexpr std::optional<DType> luminal_dtype_of(SafetensorsDType dtype) { return detail::info_of(dtype).luminal; }

constexpr SafetensorsDType safetensors_dtype_of(DType dtype) {
    switch (dtype) {
        case DType::F32: return SafetensorsDType::F32;
        case DType::F16: return SafetensorsDType::F16;
        case DType::BF16: return SafetensorsDType::BF16;
        case DType::I32: return SafetensorsDType::I32;
        case DType::I64: return SafetensorsDType::I64;
        case DType::U8: return SafetensorsDType::U8;
        case DType::Bool: return SafetensorsDType::BOOL;
    }
    return SafetensorsDType::F32;
}

// The format's spelling ("BF16") to the enum; names are case-sensitive, as in the format.
constexpr std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name) {
    for (const auto& info : detail::safetensors_dtypes)
        if (info.name == name) return info.dtype;
    return std::nullopt;
}

// "BOOL, F4, ..." for error messages that list what would have been accepted.
inline std::string known_safetensors_dtypes() {
    std::string out;
    for (const auto& info : detail::safetensors_dtypes) {
        if (!out.empty()) out += ", ";
        out += info.name;
    }
    return out;
}

}  // namespace luminal::io

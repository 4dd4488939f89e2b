#pragma once
// Element types, their sizes and names, PyTorch-style type promotion, and the
// exact conversions between f32 and the 16-bit float formats.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "luminal/core/error.hpp"

namespace luminal {

enum class DType : std::uint8_t { F32, F16, BF16, I32, I64, U8, Bool };

inline constexpr DType all_dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32,
                                       DType::I64, DType::U8,  DType::Bool};

constexpr std::size_t size_of(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 4;
        case DType::F16: case DType::BF16: return 2;
        case DType::I64: return 8;
        case DType::U8: case DType::Bool: return 1;
    }
    return 0;
}

constexpr std::string_view name_of(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F16: return "f16";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::I64: return "i64";
        case DType::U8: return "u8";
        case DType::Bool: return "bool";
    }
    return "?";
}

constexpr bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
constexpr bool is_integer(DType t) { return t == DType::I32 || t == DType::I64 || t == DType::U8; }

// PyTorch's promotion among tensor dtypes: bool < integers < floats. Mixed
// f16/bf16 promotes to f32, as torch.promote_types does.
constexpr DType promote(DType a, DType b) {
    if (a == b) return a;
    if (is_float(a) && is_float(b)) return DType::F32;
    if (is_float(a)) return a;
    if (is_float(b)) return b;
    if (a == DType::Bool) return b;
    if (b == DType::Bool) return a;
    if (a == DType::I64 || b == DType::I64) return DType::I64;
    return DType::I32;  // mixes of i32 and u8
}

// ---- 16-bit float conversions (round to nearest even, NaN preserved) ----

inline std::uint16_t f32_to_bf16_bits(float value) {
    auto bits = std::bit_cast<std::uint32_t>(value);
    if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
    std::uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_f32(std::uint16_t bits) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t f32_to_f16_bits(float value) {
    auto bits = std::bit_cast<std::uint32_t>(value);
    std::uint32_t sign = (bits >> 16) & 0x8000;
    std::uint32_t abs_bits = bits & 0x7FFFFFFF;
    if (abs_bits >= 0x7F800000) {  // inf or NaN
        std::uint32_t mantissa = abs_bits > 0x7F800000 ? 0x200 : 0;
        return static_cast<std::uint16_t>(sign | 0x7C00 | mantissa);
    }
    if (abs_bits >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // overflow
    if (abs_bits < 0x38800000) {
        // Subnormal half: scale so the integer part holds the half mantissa and
        // let the FPU round to nearest even.
        float magnitude = std::bit_cast<float>(abs_bits) * 16777216.0f;  // 2^24
        auto rounded = static_cast<std::uint32_t>(std::nearbyint(magnitude));
        return static_cast<std::uint16_t>(sign | rounded);
    }
    std::uint32_t rounding = 0xFFF + ((abs_bits >> 13) & 1);
    std::uint32_t rebiased = abs_bits - (112u << 23) + rounding;
    return static_cast<std::uint16_t>(sign | (rebiased >> 13));
}

inline float f16_bits_to_f32(std::uint16_t bits) {
    std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000) << 16;
    std::uint32_t exponent = (bits >> 10) & 0x1F;
    std::uint32_t mantissa = bits & 0x3FF;
    if (exponent == 0) {
        float magnitude = static_cast<float>(mantissa) / 16777216.0f;  // mantissa * 2^-24
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000 | (mantissa << 13));
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

}  // namespace luminal

#pragma once
// Converting a stored tensor to the element type a runtime computes in. Only
// exact conversions succeed: bf16/f16 -> f32 always, integers widen, and any
// other pair element by element as long as each value survives unchanged
// (an i64 of 7 becomes the i32 7; an f32 of 0.1 never becomes a bf16). A value
// that would change, or a stored type luminal cannot decode (FP8, F4, C64),
// is an Error naming the file, the tensor, the element and its value.
//
// to_vector<T> feeds a runtime's set_data(tensor, std::vector<T>); convert()
// builds a HostBuffer of any luminal dtype.
#include "luminal/core/dtype.hpp"
#include "luminal/io/safetensors.hpp"
#include "luminal/core/host_buffer.hpp"

#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace luminal::io {

// Element types to_vector produces (std::vector<bool> has no contiguous storage:
// bool tensors convert to std::uint8_t).
template <typename T>
concept SafetensorsTarget = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::int32_t> ||
                            std::same_as<T, std::int64_t> || std::same_as<T, std::uint8_t>;

namespace detail {

inline constexpr double two_pow_63 = 9223372036854775808.0;

// `value` as an int64 when it is one exactly.
inline std::optional<std::int64_t> exact_int(double value) {
    if (!(value >= -two_pow_63 && value < two_pow_63) || std::trunc(value) != value) return std::nullopt;
    return static_cast<std::int64_t>(value);
}

// `value` as a double when it is one exactly (|value| > 2^53 may not be).
inline std::optional<double> exact_double(std::int64_t value) {
    const auto wide = static_cast<double>(value);
    if (!(wide < two_pow_63) || static_cast<std::int64_t>(wide) != value) return std::nullopt;
    return wide;
}

// Whether `target` holds `value` unchanged (NaN stays NaN in every float dtype).
inline bool float_fits(DType target, double value) {
    if (is_float(target)) return std::isnan(value) || round_to(target, value) == value;
    const auto integer = exact_int(value);
    return integer && wrap_to(target, *integer) == *integer;
}

inline bool int_fits(DType target, std::int64_t value) {
    if (!is_float(target)) return wrap_to(target, value) == value;
    const auto wide = exact_double(value);
    return wide && round_to(target, *wide) == *wide;
}

[[noreturn]] inline void throw_not_exact(const SafetensorsTensor& tensor, std::size_t index, std::string value,
                                         std::string_view target) {
    throw Error(tensor.file, fmt::format("tensor '{}' ({}): element {} = {} is not exactly representable as {}",
                                         tensor.name, name_of(tensor.stored_dtype), index, value, target));
}

// Checked before allocating the output, so an undecodable tensor costs nothing.
inline void check_convertible(const SafetensorsTensor& tensor) {
    switch (tensor.stored_dtype) {
        case SafetensorsDType::F4: case SafetensorsDType::F6_E2M3: case SafetensorsDType::F6_E3M2:
        case SafetensorsDType::F8_E5M2: case SafetensorsDType::F8_E4M3: case SafetensorsDType::F8_E8M0:
        case SafetensorsDType::F8_E4M3FNUZ: case SafetensorsDType::F8_E5M2FNUZ: case SafetensorsDType::C64:
            throw Error(tensor.file, fmt::format("tensor '{}' is {}, which luminal cannot convert (no such dtype)",
                                                 tensor.name, name_of(tensor.stored_dtype)));
        default: return;
    }
}

// Calls visit(index, double) for float tensors and visit(index, int64) for
// integer and bool tensors, one element at a time in storage order.
template <typename Visit>
void visit_elements(const SafetensorsTensor& tensor, Visit&& visit) {
    check_convertible(tensor);
    const std::byte* data = tensor.bytes.data();
    const auto count = static_cast<std::size_t>(tensor.numel);
    auto each = [&]<typename Stored>(auto decode) {
        for (std::size_t i = 0; i < count; ++i) {
            Stored stored;
            std::memcpy(&stored, data + i * sizeof(Stored), sizeof(Stored));  // bytes may be unaligned
            visit(i, decode(i, stored));
        }
    };
    auto widen = [](std::size_t, auto stored) { return static_cast<std::int64_t>(stored); };
    switch (tensor.stored_dtype) {
        case SafetensorsDType::F32: return each.template operator()<float>([](std::size_t, float v) { return double{v}; });
        case SafetensorsDType::F64: return each.template operator()<double>([](std::size_t, double v) { return v; });
        case SafetensorsDType::F16:
            return each.template operator()<std::uint16_t>(
                [](std::size_t, std::uint16_t bits) { return double{f16_bits_to_f32(bits)}; });
        case SafetensorsDType::BF16:
            return each.template operator()<std::uint16_t>(
                [](std::size_t, std::uint16_t bits) { return double{bf16_bits_to_f32(bits)}; });
        case SafetensorsDType::BOOL:  // any nonzero byte is true, as torch reads it
            return each.template operator()<std::uint8_t>(
                [](std::size_t, std::uint8_t byte) { return std::int64_t{byte != 0}; });
        case SafetensorsDType::U8: return each.template operator()<std::uint8_t>(widen);
        case SafetensorsDType::I8: return each.template operator()<std::int8_t>(widen);
        case SafetensorsDType::I16: return each.template operator()<std::int16_t>(widen);
        case SafetensorsDType::U16: return each.template operator()<std::uint16_t>(widen);
        case SafetensorsDType::I32: return each.template operator()<std::int32_t>(widen);
        case SafetensorsDType::U32: return each.template operator()<std::uint32_t>(widen);
        case SafetensorsDType::I64: return each.template operator()<std::int64_t>(widen);
        case SafetensorsDType::U64:
            return each.template operator()<std::uint64_t>([&](std::size_t i, std::uint64_t v) {
                if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    throw_not_exact(tensor, i, std::to_string(v), "any luminal dtype");
                return static_cast<std::int64_t>(v);
            });
        default: return;  // rejected by check_convertible above
    }
}

template <typename T>
constexpr std::string_view target_name() {
    if constexpr (std::same_as<T, double>) return "f64";
    else return name_of(*luminal_dtype_of(*safetensors_dtype_for<T>));
}

}  // namespace detail

// The tensor's values as T (row-major), converted exactly.
template <SafetensorsTarget T>
std::vector<T> to_vector(const SafetensorsTensor& tensor) {
    detail::check_convertible(tensor);
    const auto count = static_cast<std::size_t>(tensor.numel);
    std::vector<T> out(count);
    // Fast paths for the conversions weights need: the native type is one copy;
    // bf16/f16 -> f32 is always exact, so skip the per-element checks.
    if (tensor.stored_dtype == *detail::safetensors_dtype_for<T>) {
        if (count != 0) std::memcpy(out.data(), tensor.bytes.data(), tensor.bytes.size());
        return out;
    }
    if constexpr (std::same_as<T, float>) {
        const std::byte* data = tensor.bytes.data();
        if (tensor.stored_dtype == SafetensorsDType::BF16) {
            for (std::size_t i = 0; i < count; ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, data + 2 * i, 2);
                out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
            }
            return out;
        }
        if (tensor.stored_dtype == SafetensorsDType::F16) {
            for (std::size_t i = 0; i < count; ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, data + 2 * i, 2);
                out[i] = f16_bits_to_f32(bits);
            }
            return out;
        }
    }
    detail::visit_elements(tensor, [&](std::size_t i, auto value) {
        if constexpr (std::same_as<T, double>) {
            if constexpr (std::same_as<decltype(value), double>) {
                out[i] = value;
            } else {
                const auto wide = detail::exact_double(value);
                if (!wide) detail::throw_not_exact(tensor, i, std::to_string(value), "f64");
                out[i] = *wide;
            }
        } else {
            constexpr DType target = *luminal_dtype_of(*detail::safetensors_dtype_for<T>);
            bool fits;
            if constexpr (std::same_as<decltype(value), double>) fits = detail::float_fits(target, value);
            else fits = detail::int_fits(target, value);
            if (!fits) detail::throw_not_exact(tensor, i, fmt::format("{}", value), detail::target_name<T>());
            out[i] = static_cast<T>(value);
        }
    });
    return out;
}

inline std::vector<float> to_f32(const SafetensorsTensor& tensor) { return to_vector<float>(tensor); }

// The tensor's values in a HostBuffer of dtype `target`, converted exactly.
inline HostBuffer convert(const SafetensorsTensor& tensor, DType target) {
    detail::check_convertible(tensor);
    HostBuffer out(target, static_cast<std::size_t>(tensor.numel));
    detail::visit_elements(tensor, [&](std::size_t i, auto value) {
        if constexpr (std::same_as<decltype(value), double>) {
            if (!detail::float_fits(target, value)) detail::throw_not_exact(tensor, i, fmt::format("{}", value), name_of(target));
            if (is_float(target)) out.floats[i] = value;
            else out.ints[i] = static_cast<std::int64_t>(value);
        } else {
            if (!detail::int_fits(target, value)) detail::throw_not_exact(tensor, i, fmt::format("{}", value), name_of(target));
            if (is_float(target)) out.floats[i] = static_cast<double>(value);
            else out.ints[i] = value;
        }
    });
    return out;
}

}  // namespace luminal::io

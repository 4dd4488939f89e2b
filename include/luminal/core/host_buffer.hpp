#pragma once
// A tensor's values on the host as the reference runtime holds them: floats as
// double (already rounded to their dtype), integers and bools as int64 (already
// wrapped to their dtype). Arithmetic happens in these wide types and every
// stored result is rounded or wrapped back, so each dtype behaves as its own.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "luminal/core/dtype.hpp"

namespace luminal {

inline double round_to(DType dtype, double v) {
    switch (dtype) {
        case DType::F32: return static_cast<float>(v);
        case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v)));
        case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)));
        default: return v;
    }
}

// Two's-complement wrap-around, as torch's integer tensors behave.
inline std::int64_t wrap_to(DType dtype, std::int64_t v) {
    switch (dtype) {
        case DType::I32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
        case DType::U8: return static_cast<std::uint8_t>(v);
        case DType::Bool: return v != 0;
        default: return v;
    }
}

// float -> integer truncates toward zero; NaN becomes 0 and out-of-range values
// saturate to the int64 range before wrapping (C++ leaves both undefined).
inline std::int64_t float_to_int(DType dtype, double v) {
    if (dtype == DType::Bool) return v != 0;  // NaN is truthy, as in torch
    if (std::isnan(v)) return 0;
    constexpr double limit = 9.2233720368547758e18;
    if (v >= limit) return wrap_to(dtype, std::numeric_limits<std::int64_t>::max());
    if (v <= -limit) return wrap_to(dtype, std::numeric_limits<std::int64_t>::min());
    return wrap_to(dtype, static_cast<std::int64_t>(v));
}

struct HostBuffer {
    DType dtype = DType::F32;
    std::vector<double> floats;      // float dtypes
    std::vector<std::int64_t> ints;  // integer and bool dtypes

    HostBuffer() = default;
    HostBuffer(DType t, std::size_t n) : dtype(t) {
        if (is_float(t)) floats.assign(n, 0.0);
        else ints.assign(n, 0);
    }
    std::size_t size() const { return is_float(dtype) ? floats.size() : ints.size(); }
    double as_double(std::size_t i) const { return is_float(dtype) ? floats[i] : static_cast<double>(ints[i]); }
    std::int64_t as_int(std::size_t i) const { return is_float(dtype) ? float_to_int(DType::I64, floats[i]) : ints[i]; }
    // Stores a value converted to this buffer's dtype (the Cast semantics).
    void store_double(std::size_t i, double v) {
        if (is_float(dtype)) floats[i] = round_to(dtype, v);
        else ints[i] = float_to_int(dtype, v);
    }
    void store_int(std::size_t i, std::int64_t v) {
        if (is_float(dtype)) floats[i] = round_to(dtype, static_cast<double>(v));
        else ints[i] = wrap_to(dtype, v);
    }
    void copy_element(std::size_t i, const HostBuffer& src, std::size_t j) {
        if (is_float(src.dtype)) store_double(i, src.floats[j]);
        else store_int(i, src.ints[j]);
    }
};

}  // namespace luminal

#pragma once
// How the CPU backend holds and computes each dtype. Buffers keep every dtype
// in its own width (f16/bf16 as their 16 raw bits); arithmetic happens in one
// of two lane types: float for the float dtypes, int64 for integers and bool.
// A value is rounded (f16, bf16) or wrapped (i32, u8, bool) back to its dtype
// after every operation, so each dtype behaves as the reference's does.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "luminal/core/dtype.hpp"
#include "luminal/core/host_buffer.hpp"

namespace luminal::cpu {

template <DType D>
struct StorageOf;
template <> struct StorageOf<DType::F32> { using type = float; };
template <> struct StorageOf<DType::F16> { using type = std::uint16_t; };
template <> struct StorageOf<DType::BF16> { using type = std::uint16_t; };
template <> struct StorageOf<DType::I32> { using type = std::int32_t; };
template <> struct StorageOf<DType::I64> { using type = std::int64_t; };
template <> struct StorageOf<DType::U8> { using type = std::uint8_t; };
template <> struct StorageOf<DType::Bool> { using type = std::uint8_t; };

template <DType D>
using storage_t = typename StorageOf<D>::type;
template <DType D>
using lane_t = std::conditional_t<is_float(D), float, std::int64_t>;

template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

// Calls f(DTypeTag<d>{}) so kernels can be templates over the dtype.
template <typename F>
decltype(auto) visit_dtype(DType d, F&& f) {
    switch (d) {
        case DType::F32: return f(DTypeTag<DType::F32>{});
        case DType::F16: return f(DTypeTag<DType::F16>{});
        case DType::BF16: return f(DTypeTag<DType::BF16>{});
        case DType::I32: return f(DTypeTag<DType::I32>{});
        case DType::I64: return f(DTypeTag<DType::I64>{});
        case DType::U8: return f(DTypeTag<DType::U8>{});
        case DType::Bool: break;
    }
    return f(DTypeTag<DType::Bool>{});
}

// Stored bits -> lane value of the same dtype.
template <DType D>
inline lane_t<D> to_lane(storage_t<D> s) {
    if constexpr (D == DType::F16) return f16_bits_to_f32(s);
    else if constexpr (D == DType::BF16) return bf16_bits_to_f32(s);
    else return static_cast<lane_t<D>>(s);
}

// Lane value already representable in D -> stored bits.
template <DType D>
inline storage_t<D> to_storage(lane_t<D> v) {
    if constexpr (D == DType::F16) return f32_to_f16_bits(v);
    else if constexpr (D == DType::BF16) return f32_to_bf16_bits(v);
    else return static_cast<storage_t<D>>(v);
}

// The Cast semantics (host_buffer.hpp's store_double / store_int): any lane
// value converted to dtype D, as a lane value of D.
template <DType D>
inline lane_t<D> cast_lane(float v) {
    if constexpr (D == DType::F32) return v;
    else if constexpr (D == DType::F16) return f16_bits_to_f32(f32_to_f16_bits(v));
    else if constexpr (D == DType::BF16) return bf16_bits_to_f32(f32_to_bf16_bits(v));
    else return float_to_int(D, static_cast<double>(v));
}
template <DType D>
inline lane_t<D> cast_lane(std::int64_t v) {
    // int -> float goes through double, as the reference's store_int does.
    if constexpr (is_float(D)) return cast_lane<D>(static_cast<float>(static_cast<double>(v)));
    else if constexpr (D == DType::I64) return v;
    else return wrap_to(D, v);
}
// A double (a Constant's value) converted to dtype D without an f32 detour for
// integers, as store_double does.
template <DType D>
inline lane_t<D> cast_double(double v) {
    if constexpr (is_float(D)) return cast_lane<D>(static_cast<float>(v));
    else return float_to_int(D, v);
}

// Reads a lane value of type L (float or int64) from storage of dtype D, with
// the reference's as_double / as_int conversions when the domains differ.
template <typename L, DType D>
inline L read_as(storage_t<D> s) {
    lane_t<D> v = to_lane<D>(s);
    if constexpr (std::is_same_v<L, lane_t<D>>) return v;
    else if constexpr (std::is_same_v<L, float>) return static_cast<float>(static_cast<double>(v));
    else return float_to_int(DType::I64, static_cast<double>(v));
}

// Stores a lane value of any domain into storage of dtype D (Cast semantics).
template <DType D, typename L>
inline storage_t<D> write_as(L v) {
    return to_storage<D>(cast_lane<D>(v));
}

// Rounds or wraps lane values in place to dtype D (no-op for f32 and i64).
template <DType D>
inline void round_lanes(lane_t<D>* v, std::int64_t n) {
    if constexpr (D == DType::F32 || D == DType::I64) return;
    else
        for (std::int64_t i = 0; i < n; ++i) v[i] = cast_lane<D>(v[i]);
}

}  // namespace luminal::cpu

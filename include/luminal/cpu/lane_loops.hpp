#pragma once
// The float lane loops of the CPU's fused elementwise steps (fused.hpp), and the
// branch-free exp2 and sin they use. The headers are compiled with the user's
// flags, which need not enable AVX2 (the Python extension is built without
// -march), so each loop is compiled once per instruction set the CPU kernels
// choose among at run time (quant_isa.hpp) and a kernel takes the table of the
// best its runtime allows: the same source, vectorised 4, 8 or 16 lanes wide.
// Floating-point contraction is off (ISO C++ mode), so every table computes
// the same bits.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>

#include "luminal/cpu/quant_isa.hpp"

namespace luminal::cpu::fused_detail {

// 2^x within 2 ulp of std::exp2 and branch-free, so a loop of it vectorises
// (std::exp2 is a library call per element): x = n + f with n = round(x) and
// |f| <= 1/2; 2^f by its degree-7 Taylor polynomial (truncation below 1e-8
// relative); 2^n as exponent bits, in two halves so that every n from the
// subnormal range (-151) to overflow (129) is a normal float. NaN stays NaN.
[[gnu::always_inline]] inline float exp2_lane(float x) {
    float c = x > -151.0f ? x : -151.0f;  // also maps NaN into range; restored below
    c = c < 129.0f ? c : 129.0f;
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float n = (c + kRound) - kRound;
    const float f = c - n;
    float p = 1.5252733804059840e-5f;
    p = p * f + 1.5403530393381608e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    const std::int32_t e = static_cast<std::int32_t>(n), half = e >> 1;
    const float r = p * std::bit_cast<float>((half + 127) << 23) * std::bit_cast<float>((e - half + 127) << 23);
    return x == x ? r : x;
}

// sin x, branch-free so that a loop of it vectorises (std::sin is a library
// call per element), for |x| <= kSinLaneLimit; sin_lanes sends the rest to
// std::sin. In double: x = n pi/2 + r with |r| <= pi/4, n pi/2 in two parts
// (the first has 33 significant bits, so n times it is exact for n < 2^20),
// then sin r or cos r by Taylor series to r^13 / r^14 (truncation below 1e-13)
// and the quadrant's sign: the float result is the correctly rounded sin in
// all but ties, as the reference's double std::sin rounded is.
inline constexpr float kSinLaneLimit = 1e6f;
[[gnu::always_inline]] inline float sin_lane(float xf) {
    const double x = xf;
    constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    const double n = (x * 0.63661977236758134 + kRound) - kRound;
    const double r = (x - n * 1.5707963267341256) - n * 6.0771005065061922e-11;
    const double r2 = r * r;
    double sin_r = -1.0 / 6227020800.0;
    sin_r = sin_r * r2 + 1.0 / 39916800.0;
    sin_r = sin_r * r2 - 1.0 / 362880.0;
    sin_r = sin_r * r2 + 1.0 / 5040.0;
    sin_r = sin_r * r2 - 1.0 / 120.0;
    sin_r = sin_r * r2 + 1.0 / 6.0;
    sin_r = r * (1.0 - r2 * sin_r);  // keeps sin(-0) = -0
    double cos_r = 1.0 / 87178291200.0;
    cos_r = cos_r * r2 - 1.0 / 479001600.0;
    cos_r = cos_r * r2 + 1.0 / 3628800.0;
    cos_r = cos_r * r2 - 1.0 / 40320.0;
    cos_r = cos_r * r2 + 1.0 / 720.0;
    cos_r = cos_r * r2 - 1.0 / 24.0;
    cos_r = cos_r * r2 + 0.5;
    cos_r = 1.0 - r2 * cos_r;
    // The quadrant picks cos or sin and the sign by bit masks: a select GCC would not vectorise. Through
    // int32 (|n| < 2^20): a double -> int64 conversion has no vector form before AVX-512DQ.
    const auto quadrant = static_cast<std::int32_t>(n) & 3;
    const std::uint64_t odd = 0 - static_cast<std::uint64_t>(quadrant & 1);
    const std::uint64_t sign = static_cast<std::uint64_t>(quadrant & 2) << 62;
    const std::uint64_t v =
        ((std::bit_cast<std::uint64_t>(cos_r) & odd) | (std::bit_cast<std::uint64_t>(sin_r) & ~odd)) ^ sign;
    return static_cast<float>(std::bit_cast<double>(v));
}
[[gnu::always_inline]] inline void sin_lanes(const float* x, std::int64_t len, float* out) {
    for (std::int64_t i = 0; i < len; ++i) out[i] = sin_lane(x[i]);
    // A loop of its own, over int lanes: in the loop above, or as a bool, GCC vectorises neither.
    std::int32_t outside = 0;
    for (std::int64_t i = 0; i < len; ++i) outside |= !(std::fabs(x[i]) <= kSinLaneLimit);  // NaN and infinities too
    if (outside)
        for (std::int64_t i = 0; i < len; ++i)
            if (!(std::fabs(x[i]) <= kSinLaneLimit)) out[i] = std::sin(x[i]);
}

enum class LaneOp : std::uint8_t { Exp2, Sin, Recip, Add, Mul };
inline constexpr std::size_t kLaneOps = 5;
// out[i] = op(x[i]) or op(x[i], y[i]) for i < n (y unused by unary ops).
using LaneLoop = void (*)(const float* x, const float* y, float* out, std::int64_t n);
using LaneLoops = std::array<LaneLoop, kLaneOps>;

template <LaneOp Op>
[[gnu::always_inline]] inline void lane_loop(const float* x, const float* y, float* out, std::int64_t n) {
    if constexpr (Op == LaneOp::Exp2)
        for (std::int64_t i = 0; i < n; ++i) out[i] = exp2_lane(x[i]);
    else if constexpr (Op == LaneOp::Sin)
        sin_lanes(x, n, out);
    else if constexpr (Op == LaneOp::Recip)
        for (std::int64_t i = 0; i < n; ++i) out[i] = 1.0f / x[i];
    else if constexpr (Op == LaneOp::Add)
        for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
    else
        for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * y[i];
}

template <LaneOp Op>
void portable_lanes(const float* x, const float* y, float* out, std::int64_t n) { lane_loop<Op>(x, y, out, n); }
#ifdef LUMINAL_QUANT_X86
template <LaneOp Op>
LUMINAL_AVX2 void avx2_lanes(const float* x, const float* y, float* out, std::int64_t n) { lane_loop<Op>(x, y, out, n); }
template <LaneOp Op>
LUMINAL_VNNI void avx512_lanes(const float* x, const float* y, float* out, std::int64_t n) { lane_loop<Op>(x, y, out, n); }
#endif

template <std::size_t... I>
LaneLoops lane_loops_for(quant::Isa isa, std::index_sequence<I...>) {
#ifdef LUMINAL_QUANT_X86
    if (isa == quant::Isa::Avx512Vnni) return {&avx512_lanes<static_cast<LaneOp>(I)>...};
    if (isa == quant::Isa::Avx2) return {&avx2_lanes<static_cast<LaneOp>(I)>...};
#endif
    (void)isa;
    return {&portable_lanes<static_cast<LaneOp>(I)>...};
}

// The loops compiled for `isa` (which this CPU must support).
inline LaneLoops lane_loops(quant::Isa isa) { return lane_loops_for(isa, std::make_index_sequence<kLaneOps>{}); }

}  // namespace luminal::cpu::fused_detail

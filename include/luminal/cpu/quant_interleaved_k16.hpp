#pragma once
// The interleaved Q4_K and Q6_K products (quant_interleaved_k.hpp's tiles, as
// they are) on AVX-512 for two row groups at once: a 512-bit register holds the
// same quant vector of two tiles (rows 8g..8g+7 in its low half, the next
// group's 8 rows in its high half), so each shift and mask that unpacks 4- or
// 6-bit values, each vpdpbusd, and the scales' float work serve 16 weight rows,
// against one activation dword broadcast to all 16 lanes. Unpacking was most
// of these formats' instructions (a Q6_K value takes a nibble and 2 bits from
// two vectors); their decode GEMVs ran below the memory's bandwidth.
#include <cstdint>
#include <cstring>

#include "luminal/cpu/quant_interleaved_k.hpp"

namespace luminal::cpu::quant {

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

// The 32-byte vectors at offset `at` of two tiles as one register (a's in the low half).
LUMINAL_VNNI inline __m512i pair_at(const std::byte* a, const std::byte* b, std::int64_t at) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(vector_at(a + at)), vector_at(b + at), 1);
}

// 8 bytes at offset `at` of two tiles as 16 float lanes (u8 or i8).
LUMINAL_VNNI inline __m128i bytes_pair(const std::uint8_t* a, const std::uint8_t* b) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
}
LUMINAL_VNNI inline __m512 u8_lanes16(const std::uint8_t* a, const std::uint8_t* b) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes_pair(a, b)));
}
LUMINAL_VNNI inline __m512 i8_lanes16(const std::byte* a, const std::byte* b) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
        bytes_pair(reinterpret_cast<const std::uint8_t*>(a), reinterpret_cast<const std::uint8_t*>(b))));
}
// The 8 f16 at offset `at` of two tiles as 16 float lanes.
LUMINAL_VNNI inline __m512 f16_lanes16(const std::byte* a, const std::byte* b, std::int64_t at) {
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + at));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + at));
    return _mm512_cvtph_ps(_mm256_set_m128i(high, low));
}

// v >> bits per 16-bit lane, bits a constant once the group loop is unrolled.
LUMINAL_VNNI inline __m512i shifted_right16(__m512i v, int bits) {
    switch (bits) {
        case 2: return _mm512_srli_epi16(v, 2);
        case 4: return _mm512_srli_epi16(v, 4);
        case 6: return _mm512_srli_epi16(v, 6);
        default: return v;
    }
}

// Group g's 8 quant vectors of two tiles (vector j: elements 4j..4j+3 of each of 16 rows).
template <QuantFormat F>
LUMINAL_VNNI inline void k_group_pairs(const std::byte* a, const std::byte* b, int g, __m512i* w) {
    using namespace k_tile;
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    if constexpr (F == QuantFormat::Q4_K) {
        const std::int64_t chunk = q4_quants + 32 * 8 * (g / 2);
        for (int j = 0; j < 8; ++j)
            w[j] = _mm512_and_si512(shifted_right16(pair_at(a, b, chunk + 32 * j), 4 * (g % 2)), nibble);
    } else {
        const int half = g / 4, quarter = g % 4;
        const std::int64_t low = q6_low + 32 * (16 * half + 8 * (quarter % 2)), high = q6_high + 32 * 8 * half;
        const __m512i two_bits = _mm512_set1_epi8(0x03);
        for (int j = 0; j < 8; ++j) {
            const __m512i low_bits = _mm512_and_si512(shifted_right16(pair_at(a, b, low + 32 * j), 4 * (quarter / 2)), nibble);
            const __m512i high_bits = _mm512_and_si512(shifted_right16(pair_at(a, b, high + 32 * j), 2 * quarter), two_bits);
            w[j] = _mm512_or_si512(low_bits, _mm512_slli_epi16(high_bits, 4));
        }
    }
}

// The 16 rows of the two row groups at `a` and `b` times activation rows i0 .. i0+R-1:
// out[r * out_stride + 0..15] (rows of a, then of b). The arithmetic of
// quant_interleaved_k.hpp's 8-row body, 16 lanes wide.
template <QuantFormat F, int R>
LUMINAL_VNNI void k_interleaved_rows16_vnni(const std::byte* a, const std::byte* b, const Q8Rows& x, std::int64_t i0,
                                            float* out, std::int64_t out_stride) {
    using namespace k_tile;
    constexpr std::int64_t tile_bytes = kRows * block_bytes<F>;
    __m512 acc[R], mins[R];
    for (int r = 0; r < R; ++r) acc[r] = mins[r] = _mm512_setzero_ps();
    for (std::int64_t sb = 0; sb < x.blocks / kGroups; ++sb) {
        const std::byte* ta = a + sb * tile_bytes;
        const std::byte* tb = b + sb * tile_bytes;
        [[maybe_unused]] alignas(32) std::uint8_t scales_a[64], scales_b[64], mins_a[64], mins_b[64];
        if constexpr (F == QuantFormat::Q4_K) {
            unpack_six_bits_avx2(ta + q4_scales, scales_a);
            unpack_six_bits_avx2(tb + q4_scales, scales_b);
            unpack_six_bits_avx2(ta + q4_mins, mins_a);
            unpack_six_bits_avx2(tb + q4_mins, mins_b);
        }
        const __m512 d = f16_lanes16(ta, tb, F == QuantFormat::Q4_K ? q4_d : q6_d);
        [[maybe_unused]] const __m512 dmin = F == QuantFormat::Q4_K ? f16_lanes16(ta, tb, q4_dmin) : d;
        _Pragma("GCC unroll 8") for (int g = 0; g < kGroups; ++g) {
            __m512i w[8];
            k_group_pairs<F>(ta, tb, g, w);
            if constexpr (F == QuantFormat::Q4_K) {
                const __m512 scale = _mm512_mul_ps(d, u8_lanes16(scales_a + 8 * g, scales_b + 8 * g));
                const __m512 minimum = _mm512_mul_ps(dmin, u8_lanes16(mins_a + 8 * g, mins_b + 8 * g));
                for (int r = 0; r < R; ++r) {
                    const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + g;
                    const std::int8_t* q = x.q.data() + at * kQuantBlock;
                    __m512i sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                    for (int j = 0; j < 8; ++j) {
                        std::int32_t four;
                        std::memcpy(&four, q + 4 * j, 4);
                        sums[j & 1] = _mm512_dpbusd_epi32(sums[j & 1], w[j], _mm512_set1_epi32(four));
                    }
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sums[0], sums[1])),
                                             _mm512_mul_ps(scale, _mm512_set1_ps(x.scale[at])), acc[r]);
                    mins[r] = _mm512_fmadd_ps(minimum, _mm512_set1_ps(x.sum[at]), mins[r]);
                }
            } else {
                const __m512 first = _mm512_mul_ps(d, i8_lanes16(ta + q6_scales + 8 * (2 * g), tb + q6_scales + 8 * (2 * g)));
                const __m512 second =
                    _mm512_mul_ps(d, i8_lanes16(ta + q6_scales + 8 * (2 * g + 1), tb + q6_scales + 8 * (2 * g + 1)));
                for (int r = 0; r < R; ++r) {
                    const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + g;
                    const std::int8_t* q = x.q.data() + at * kQuantBlock;
                    __m512i sums[2] = {_mm512_set1_epi32(-32 * x.half_sums[2 * at]),
                                       _mm512_set1_epi32(-32 * x.half_sums[2 * at + 1])};
                    for (int j = 0; j < 8; ++j) {
                        std::int32_t four;
                        std::memcpy(&four, q + 4 * j, 4);
                        sums[j / 4] = _mm512_dpbusd_epi32(sums[j / 4], w[j], _mm512_set1_epi32(four));
                    }
                    const __m512 both = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[0]), first,
                                                        _mm512_mul_ps(_mm512_cvtepi32_ps(sums[1]), second));
                    acc[r] = _mm512_fmadd_ps(both, _mm512_set1_ps(x.scale[at]), acc[r]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * out_stride, _mm512_sub_ps(acc[r], mins[r]));
}

}  // namespace simd_detail
#endif

}  // namespace luminal::cpu::quant

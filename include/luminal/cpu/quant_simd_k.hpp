#pragma once
// The K super-block products (Q4_K, Q6_K; quant_scalar.hpp gives the sums)
// with x86 vector instructions. A super-block of 256 is eight groups of 32,
// each meeting one 32-element activation block (its own d_x), so every group
// gets one integer dot product and one f32 multiply-add:
//  * Q4_K: a 32-byte load holds groups 2c (low nibbles) and 2c + 1 (high);
//    the dot is unsigned nibbles x int8 activations (as Q4_0). The eight
//    group scales d sc_g d_x are one vector product per super-block and row,
//    broadcast per group; the min term dmin m_g s_x is one vector FMA.
//  * Q6_K: a group's quants are rebuilt from a nibble and 2 high bits and
//    offset by -32 to signed bytes (|w|, sign(x, w) turns the signed product
//    into vpmaddubsw's unsigned one); the group's two halves of 16 have their
//    own int8 scale, which AVX2 applies in vpmaddwd (i16 pairs times the
//    scale) and VNNI by an i32 multiply of vpdpbusd's sums.
// With f32 activations a super-block is decoded to 256 floats on the stack
// (bit-exact with io's decoders); quant_simd.hpp's f32 product multiplies up to 4 rows per decode.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/quant_scalar.hpp"

namespace luminal::cpu::quant {

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

inline constexpr int kGroups = static_cast<int>(kMaxBlockElements / kQuantBlock);

// Q4_K's eight 6-bit scales and mins (layout: io::detail::unpack_k_scales)
// unpacked four at a time with 32-bit masks.
inline void q4_k_scales(const std::byte* packed, std::uint8_t* scales, std::uint8_t* mins) {
    std::uint32_t words[3];
    std::memcpy(words, packed, sizeof words);
    const std::uint32_t low_scales = words[0] & 0x3F3F3F3Fu, low_mins = words[1] & 0x3F3F3F3Fu;
    const std::uint32_t high_scales = (words[2] & 0x0F0F0F0Fu) | ((words[0] >> 2) & 0x30303030u);
    const std::uint32_t high_mins = ((words[2] >> 4) & 0x0F0F0F0Fu) | ((words[1] >> 2) & 0x30303030u);
    std::memcpy(scales, &low_scales, 4);
    std::memcpy(scales + 4, &high_scales, 4);
    std::memcpy(mins, &low_mins, 4);
    std::memcpy(mins + 4, &high_mins, 4);
}

LUMINAL_AVX2 inline __m256 u8x8_to_f32(const std::uint8_t* bytes) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes))));
}

LUMINAL_AVX2 inline const __m256i* as_vector(const void* p) { return reinterpret_cast<const __m256i*>(p); }

// Group g of a Q6_K super-block as 32 signed bytes q - 32.
LUMINAL_AVX2 inline __m256i q6_k_group(const std::byte* block, int g) {
    const int half = g / 4, quarter = g % 4;
    const __m256i nibbles = _mm256_loadu_si256(as_vector(block + 64 * half + 32 * (quarter % 2)));
    const __m256i high = _mm256_loadu_si256(as_vector(block + 128 + 32 * half));
    const __m256i low = _mm256_and_si256(quarter < 2 ? nibbles : _mm256_srli_epi16(nibbles, 4), _mm256_set1_epi8(0x0F));
    // The 2 bits at shift 2 * quarter, moved to bits 4-5 (16-bit shifts; the mask drops what crosses bytes).
    const int up = 4 - 2 * quarter;
    const __m256i moved = up >= 0 ? _mm256_sll_epi16(high, _mm_cvtsi32_si128(up))
                                  : _mm256_srl_epi16(high, _mm_cvtsi32_si128(-up));
    const __m256i top = _mm256_and_si256(moved, _mm256_set1_epi8(0x30));
    return _mm256_sub_epi8(_mm256_or_si256(low, top), _mm256_set1_epi8(32));
}

LUMINAL_AVX2 inline int q6_k_scale(const std::byte* block, int s) {
    return static_cast<std::int8_t>(block[192 + s]);
}

// Group g's dot of signed w and activations x, each half of 16 times its scale.
LUMINAL_AVX2 inline __m256i q6_k_dot_avx2(const std::byte* block, int g, __m256i w, __m256i x) {
    const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<std::int16_t>(q6_k_scale(block, 2 * g + 1))),
                                            _mm_set1_epi16(static_cast<std::int16_t>(q6_k_scale(block, 2 * g))));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), scales);
}

LUMINAL_VNNI inline __m256i q6_k_dot_vnni(const std::byte* block, int g, __m256i w, __m256i x) {
    const __m256i scales = _mm256_set_m128i(_mm_set1_epi32(q6_k_scale(block, 2 * g + 1)),
                                            _mm_set1_epi32(q6_k_scale(block, 2 * g)));
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_mullo_epi32(sums, scales);
}

// R activation rows from i0 times Q4_K weight row w (out[r * out_stride]);
// DOT is dot_avx2 or dot_vnni. The min term is subtracted in the even accumulator.
#define LUMINAL_Q4_K_ROWS_BODY(DOT)                                                                          \
    __m256 acc[R][2];                                                                                        \
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();                                 \
    for (std::int64_t sb = 0; sb < x.blocks / kGroups; ++sb) {                                               \
        const std::byte* block = w + sb * block_bytes<QuantFormat::Q4_K>;                                    \
        std::uint8_t scales[8], mins[8];                                                                     \
        q4_k_scales(block + 4, scales, mins);                                                                \
        const __m256 group_scales = _mm256_mul_ps(_mm256_set1_ps(f16(block)), u8x8_to_f32(scales));          \
        const __m256 group_mins = _mm256_mul_ps(_mm256_set1_ps(f16(block + 2)), u8x8_to_f32(mins));          \
        __m256 scale[R];                                                                                     \
        for (int r = 0; r < R; ++r) {                                                                        \
            const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups;                                      \
            scale[r] = _mm256_mul_ps(group_scales, _mm256_loadu_ps(x.scale.data() + at));                    \
            acc[r][0] = _mm256_fnmadd_ps(group_mins, _mm256_loadu_ps(x.sum.data() + at), acc[r][0]);         \
        }                                                                                                    \
        for (int c = 0; c < kGroups / 2; ++c) {                                                              \
            const __m256i packed = _mm256_loadu_si256(as_vector(block + 16 + 32 * c));                       \
            const __m256i mask = _mm256_set1_epi8(0x0F);                                                     \
            const __m256i values[2] = {_mm256_and_si256(packed, mask),                                       \
                                       _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask)};                \
            for (int h = 0; h < 2; ++h) {                                                                    \
                const __m256i lane = _mm256_set1_epi32(2 * c + h);                                           \
                for (int r = 0; r < R; ++r) {                                                                \
                    const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + 2 * c + h;                  \
                    const __m256i q = _mm256_loadu_si256(as_vector(x.q.data() + at * kQuantBlock));          \
                    acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT<QuantFormat::Q4_K>(values[h], q)),     \
                                                _mm256_permutevar8x32_ps(scale[r], lane), acc[r][h]);        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }                                                                                                        \
    for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));

// The same for Q6_K; DOT is q6_k_dot_avx2 or q6_k_dot_vnni (scales applied).
#define LUMINAL_Q6_K_ROWS_BODY(DOT)                                                                        \
    __m256 acc[R][2];                                                                                      \
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();                               \
    for (std::int64_t sb = 0; sb < x.blocks / kGroups; ++sb) {                                             \
        const std::byte* block = w + sb * block_bytes<QuantFormat::Q6_K>;                                  \
        const float d = f16(block + 208);                                                                  \
        for (int g = 0; g < kGroups; ++g) {                                                                \
            const __m256i values = q6_k_group(block, g);                                                   \
            for (int r = 0; r < R; ++r) {                                                                  \
                const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + g;                            \
                const __m256i q = _mm256_loadu_si256(as_vector(x.q.data() + at * kQuantBlock));            \
                acc[r][g & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(block, g, values, q)),              \
                                                _mm256_set1_ps(d * x.scale[at]), acc[r][g & 1]);           \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));

template <QuantFormat F, int R>
LUMINAL_AVX2 void k_rows_avx2(const std::byte* w, const Q8Rows& x, std::int64_t i0, float* out,
                              std::int64_t out_stride) {
    if constexpr (F == QuantFormat::Q4_K) {
        LUMINAL_Q4_K_ROWS_BODY(dot_avx2)
    } else {
        LUMINAL_Q6_K_ROWS_BODY(q6_k_dot_avx2)
    }
}

template <QuantFormat F, int R>
LUMINAL_VNNI void k_rows_vnni(const std::byte* w, const Q8Rows& x, std::int64_t i0, float* out,
                              std::int64_t out_stride) {
    if constexpr (F == QuantFormat::Q4_K) {
        LUMINAL_Q4_K_ROWS_BODY(dot_vnni)
    } else {
        LUMINAL_Q6_K_ROWS_BODY(q6_k_dot_vnni)
    }
}
#undef LUMINAL_Q4_K_ROWS_BODY
#undef LUMINAL_Q6_K_ROWS_BODY

// A super-block decoded to 256 floats, rounded as io's decoders round.
template <QuantFormat F>
LUMINAL_AVX2 void decode_k_block_avx2(const std::byte* block, float* out) {
    if constexpr (F == QuantFormat::Q4_K) {
        std::uint8_t scales[8], mins[8];
        q4_k_scales(block + 4, scales, mins);
        const float d = f16(block), dmin = f16(block + 2);
        for (int g = 0; g < kGroups; ++g) {
            alignas(32) std::uint8_t nibbles[32];
            const __m256i packed = _mm256_loadu_si256(as_vector(block + 16 + 32 * (g / 2)));
            const __m256i shifted = g % 2 ? _mm256_srli_epi16(packed, 4) : packed;
            _mm256_store_si256(reinterpret_cast<__m256i*>(nibbles), _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F)));
            const __m256 scale = _mm256_set1_ps(d * static_cast<float>(scales[g]));
            const __m256 minimum = _mm256_set1_ps(dmin * static_cast<float>(mins[g]));
            for (int c = 0; c < 4; ++c)
                _mm256_storeu_ps(out + 32 * g + 8 * c,
                                 _mm256_sub_ps(_mm256_mul_ps(scale, u8x8_to_f32(nibbles + 8 * c)), minimum));
        }
    } else {
        const float d = f16(block + 208);
        for (int g = 0; g < kGroups; ++g) {
            alignas(32) std::int8_t values[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(values), q6_k_group(block, g));
            for (int c = 0; c < 4; ++c) {
                const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + 8 * c));
                const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
                const __m256 scale = _mm256_set1_ps(d * static_cast<float>(q6_k_scale(block, 2 * g + c / 2)));
                _mm256_storeu_ps(out + 32 * g + 8 * c, _mm256_mul_ps(scale, v));
            }
        }
    }
}

}  // namespace simd_detail
#endif

}  // namespace luminal::cpu::quant

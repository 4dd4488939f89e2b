#pragma once
// Q4_K and Q6_K weights repacked at load with 8 rows interleaved, as
// quant_interleaved.hpp does for the 32-element formats: a tile is one
// super-block column of 8 rows, the same bytes as the file's 8 super-blocks
// (memory stays at the file's size), laid out so that a 256-bit register
// holds 4 quant bytes of each row (an activation dword broadcast meets all 8
// rows in one vpdpbusd / vpmaddubsw) and a group's scales of 8 rows are one
// vector: each group of 32 costs per activation row 8 integer dots and two
// FMAs for 8 rows, with no horizontal sums.
//
// Q4_K tile (8 x 144 bytes):
//   0    d[8], at 16 dmin[8]   f16, row r at 2r
//   32   scales, at 80 mins    64 6-bit values each, value 8g + r (group g, row r):
//                              32 bytes of low 4 bits (byte i: value i in bits 0-3, value
//                              32 + i in bits 4-7), 16 bytes of high 2 bits (byte i: values
//                              i, 16 + i, 32 + i, 48 + i at bits 0, 2, 4, 6)
//   128  quants                chunk c (groups 2c in the low nibbles, 2c + 1 in the high),
//                              vector j at 128 + 32 (8c + j): at 4r, row r's bytes 4j..4j+3
//                              of the chunk (elements 4j..4j+3 of both groups)
// Q6_K tile (8 x 210 bytes):
//   0    d[8] f16
//   16   scales int8, sub-block s (16 elements) of row r at 8s + r
//   144  low nibbles: half h, chunk a, vector j at 144 + 32 (16h + 8a + j): at 4r,
//        row r's ql[64h + 32a + 4j ..+3] (groups 4h + a low, 4h + a + 2 high)
//   1168 high bits: half h, vector j at 1168 + 32 (8h + j): at 4r, row r's qh[32h + 4j ..+3]
//        (bits 2q..2q+1: group 4h + q)
// Q6_K's values stay unsigned (0..63, u8 as the instructions take them); the
// -32 comes back through the activations' sums per 16 (Q8Rows::half_sums).
#include <cstdint>
#include <cstring>

#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/quant_scalar.hpp"

namespace luminal::cpu::quant {

namespace k_tile {

inline constexpr int kRows = 8, kGroups = 8;
inline constexpr std::int64_t q4_d = 0, q4_dmin = 16, q4_scales = 32, q4_mins = 80, q4_quants = 128;
inline constexpr std::int64_t q6_d = 0, q6_scales = 16, q6_low = 144, q6_high = 1168;

// 64 6-bit values as 48 bytes (the layout above) and back.
inline void pack_six_bits(const int* values, std::byte* out) {
    for (int i = 0; i < 32; ++i) out[i] = static_cast<std::byte>((values[i] & 15) | (values[32 + i] & 15) << 4);
    for (int i = 0; i < 16; ++i)
        out[32 + i] = static_cast<std::byte>(values[i] >> 4 | (values[16 + i] >> 4) << 2 | (values[32 + i] >> 4) << 4 |
                                             (values[48 + i] >> 4) << 6);
}
inline void unpack_six_bits(const std::byte* packed, int* values) {
    for (int v = 0; v < 64; ++v) {
        const auto low = static_cast<int>(packed[v % 32]) >> (4 * (v / 32)) & 15;
        const auto high = static_cast<int>(packed[32 + v % 16]) >> (2 * (v / 16)) & 3;
        values[v] = low | high << 4;
    }
}

// A Q4_K super-block's 12 bytes of scales and mins from the unpacked values (the inverse of io's unpack_k_scales).
inline void pack_k_scales(const int* scales, const int* mins, std::byte* packed) {
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<std::byte>(scales[j] | (scales[j + 4] >> 4) << 6);
        packed[4 + j] = static_cast<std::byte>(mins[j] | (mins[j + 4] >> 4) << 6);
        packed[8 + j] = static_cast<std::byte>((scales[j + 4] & 15) | (mins[j + 4] & 15) << 4);
    }
}

}  // namespace k_tile

// The 8 super-blocks at blocks + r * block_bytes (rows 0..7, one column) as a tile.
template <QuantFormat F>
inline void pack_k_tile(const std::byte* blocks, std::byte* tile) {
    using namespace k_tile;
    constexpr std::int64_t bb = block_bytes<F>;
    if constexpr (F == QuantFormat::Q4_K) {
        int scales[64], mins[64];
        for (int r = 0; r < kRows; ++r) {
            const std::byte* block = blocks + r * bb;
            std::memcpy(tile + q4_d + 2 * r, block, 2);
            std::memcpy(tile + q4_dmin + 2 * r, block + 2, 2);
            int row_scales[8], row_mins[8];
            io::detail::unpack_k_scales(block + 4, row_scales, row_mins);
            for (int g = 0; g < kGroups; ++g) scales[8 * g + r] = row_scales[g], mins[8 * g + r] = row_mins[g];
            for (int v = 0; v < 32; ++v) std::memcpy(tile + q4_quants + 32 * v + 4 * r, block + 16 + 4 * v, 4);
        }
        pack_six_bits(scales, tile + q4_scales);
        pack_six_bits(mins, tile + q4_mins);
    } else {
        for (int r = 0; r < kRows; ++r) {
            const std::byte* block = blocks + r * bb;
            std::memcpy(tile + q6_d + 2 * r, block + 208, 2);
            for (int s = 0; s < 16; ++s) tile[q6_scales + 8 * s + r] = block[192 + s];
            for (int v = 0; v < 32; ++v) std::memcpy(tile + q6_low + 32 * v + 4 * r, block + 4 * v, 4);
            for (int v = 0; v < 16; ++v) std::memcpy(tile + q6_high + 32 * v + 4 * r, block + 128 + 4 * v, 4);
        }
    }
}

// The inverse of pack_k_tile.
template <QuantFormat F>
inline void unpack_k_tile(const std::byte* tile, std::byte* blocks) {
    using namespace k_tile;
    constexpr std::int64_t bb = block_bytes<F>;
    if constexpr (F == QuantFormat::Q4_K) {
        int scales[64], mins[64];
        unpack_six_bits(tile + q4_scales, scales);
        unpack_six_bits(tile + q4_mins, mins);
        for (int r = 0; r < kRows; ++r) {
            std::byte* block = blocks + r * bb;
            std::memcpy(block, tile + q4_d + 2 * r, 2);
            std::memcpy(block + 2, tile + q4_dmin + 2 * r, 2);
            int row_scales[8], row_mins[8];
            for (int g = 0; g < kGroups; ++g) row_scales[g] = scales[8 * g + r], row_mins[g] = mins[8 * g + r];
            pack_k_scales(row_scales, row_mins, block + 4);
            for (int v = 0; v < 32; ++v) std::memcpy(block + 16 + 4 * v, tile + q4_quants + 32 * v + 4 * r, 4);
        }
    } else {
        for (int r = 0; r < kRows; ++r) {
            std::byte* block = blocks + r * bb;
            std::memcpy(block + 208, tile + q6_d + 2 * r, 2);
            for (int s = 0; s < 16; ++s) block[192 + s] = tile[q6_scales + 8 * s + r];
            for (int v = 0; v < 32; ++v) std::memcpy(block + 4 * v, tile + q6_low + 32 * v + 4 * r, 4);
            for (int v = 0; v < 16; ++v) std::memcpy(block + 128 + 4 * v, tile + q6_high + 32 * v + 4 * r, 4);
        }
    }
}

// x.half_sums: each 16 activations' integer sum (Q6_K's -32 offset per sub-block).
inline void sum_halves(Q8Rows& x) {
    x.half_sums.resize(x.q.size() / 16);
    for (std::size_t h = 0; h < x.half_sums.size(); ++h) {
        int sum = 0;
        for (int e = 0; e < 16; ++e) sum += x.q[16 * h + e];
        x.half_sums[h] = sum;
    }
}

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

// The 64 6-bit values of pack_six_bits as bytes.
LUMINAL_AVX2 inline void unpack_six_bits_avx2(const std::byte* packed, std::uint8_t* values) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed));
    const __m256i high = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + 32)));
    const __m256i nibble = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(0x03);
    // Values 0..31 take their high bits from shifts 0 (0..15) and 2 (16..31); 32..63 from 4 and 6.
    const __m256i first_high = _mm256_and_si256(_mm256_srlv_epi32(high, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2)), two_bits);
    const __m256i second_high = _mm256_and_si256(_mm256_srlv_epi32(high, _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6)), two_bits);
    const __m256i first = _mm256_or_si256(_mm256_and_si256(low, nibble), _mm256_slli_epi16(first_high, 4));
    const __m256i second = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low, 4), nibble), _mm256_slli_epi16(second_high, 4));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values), first);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + 32), second);
}

LUMINAL_AVX2 inline __m256 u8_lanes(const std::uint8_t* bytes) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes))));
}
LUMINAL_AVX2 inline __m256 i8_lanes(const std::byte* bytes) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes))));
}
LUMINAL_AVX2 inline __m256 f16_lanes(const std::byte* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
LUMINAL_AVX2 inline __m256i vector_at(const std::byte* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// v >> bits per 16-bit lane, the count an immediate (a shift by a register count
// is slower, and a shift by 0 is skipped).
LUMINAL_AVX2 inline __m256i shifted_right(__m256i v, int bits) {
    switch (bits) {
        case 2: return _mm256_srli_epi16(v, 2);
        case 4: return _mm256_srli_epi16(v, 4);
        case 6: return _mm256_srli_epi16(v, 6);
        default: return v;
    }
}

// Group g's 8 quant vectors (vector j: elements 4j..4j+3 of each row), values 0..15 or 0..63.
template <QuantFormat F>
LUMINAL_AVX2 inline void k_group_vectors(const std::byte* tile, int g, __m256i* w) {
    using namespace k_tile;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    if constexpr (F == QuantFormat::Q4_K) {
        const std::byte* chunk = tile + q4_quants + 32 * 8 * (g / 2);
        for (int j = 0; j < 8; ++j) w[j] = _mm256_and_si256(shifted_right(vector_at(chunk + 32 * j), 4 * (g % 2)), nibble);
    } else {
        const int half = g / 4, quarter = g % 4;
        const std::byte* low = tile + q6_low + 32 * (16 * half + 8 * (quarter % 2));
        const std::byte* high = tile + q6_high + 32 * 8 * half;
        const __m256i two_bits = _mm256_set1_epi8(0x03);
        for (int j = 0; j < 8; ++j) {
            const __m256i low_bits = _mm256_and_si256(shifted_right(vector_at(low + 32 * j), 4 * (quarter / 2)), nibble);
            const __m256i high_bits = _mm256_and_si256(shifted_right(vector_at(high + 32 * j), 2 * quarter), two_bits);
            w[j] = _mm256_or_si256(low_bits, _mm256_slli_epi16(high_bits, 4));
        }
    }
}

// Per lane the sum of N quant vectors' products with the activations at q.
template <QuantFormat F, int N>
LUMINAL_AVX2 inline __m256i k_dots_avx2(const __m256i* w, const std::int8_t* q) {
    return unsigned_dots_avx2<N, F == QuantFormat::Q4_K ? 15 : 63>(w, q);
}
template <QuantFormat F, int N>
LUMINAL_VNNI inline __m256i k_dots_vnni(const __m256i* w, const std::int8_t* q) {
    return unsigned_dots_vnni<N>(w, q);
}

// The 8 rows of `group` times activation rows i0 .. i0+R-1: out[r * out_stride + 0..7].
// Q4_K: acc += (d sc_g) d_x dot, mins -= (dmin m_g) s_x; Q6_K: each half of 16 its
// own scale, (dot - 32 sum(q_x)) d sc_s d_x.
#define LUMINAL_K_INTERLEAVED_ROWS_BODY(DOTS)                                                                     \
    using namespace k_tile;                                                                                      \
    constexpr std::int64_t tile_bytes = kRows * block_bytes<F>;                                                  \
    __m256 acc[R], mins[R];                                                                                      \
    for (int r = 0; r < R; ++r) acc[r] = mins[r] = _mm256_setzero_ps();                                          \
    for (std::int64_t sb = 0; sb < x.blocks / kGroups; ++sb) {                                                   \
        const std::byte* tile = group + sb * tile_bytes;                                                         \
        [[maybe_unused]] alignas(32) std::uint8_t scales[64], minimums[64];                                      \
        if constexpr (F == QuantFormat::Q4_K) {                                                                  \
            unpack_six_bits_avx2(tile + q4_scales, scales);                                                      \
            unpack_six_bits_avx2(tile + q4_mins, minimums);                                                      \
        }                                                                                                        \
        const __m256 d = f16_lanes(tile + (F == QuantFormat::Q4_K ? q4_d : q6_d));                               \
        /* unrolled: each group's shift counts are then constants (no branch per vector) */                    \
        _Pragma("GCC unroll 8") for (int g = 0; g < kGroups; ++g) {                                           \
            __m256i w[8];                                                                                        \
            k_group_vectors<F>(tile, g, w);                                                                      \
            if constexpr (F == QuantFormat::Q4_K) {                                                              \
                const __m256 scale = _mm256_mul_ps(d, u8_lanes(scales + 8 * g));                                 \
                const __m256 minimum = _mm256_mul_ps(f16_lanes(tile + q4_dmin), u8_lanes(minimums + 8 * g));     \
                for (int r = 0; r < R; ++r) {                                                                    \
                    const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + g;                              \
                    const std::int8_t* q = x.q.data() + at * kQuantBlock;                                        \
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOTS<F, 8>(w, q)),                               \
                                             _mm256_mul_ps(scale, _mm256_set1_ps(x.scale[at])), acc[r]);         \
                    mins[r] = _mm256_fmadd_ps(minimum, _mm256_set1_ps(x.sum[at]), mins[r]);                      \
                }                                                                                                \
            } else {                                                                                             \
                const __m256 first = _mm256_mul_ps(d, i8_lanes(tile + q6_scales + 8 * (2 * g)));                 \
                const __m256 second = _mm256_mul_ps(d, i8_lanes(tile + q6_scales + 8 * (2 * g + 1)));            \
                for (int r = 0; r < R; ++r) {                                                                    \
                    const std::int64_t at = (i0 + r) * x.blocks + sb * kGroups + g;                              \
                    const std::int8_t* q = x.q.data() + at * kQuantBlock;                                        \
                    const __m256i sums[2] = {                                                                    \
                        _mm256_add_epi32(_mm256_set1_epi32(-32 * x.half_sums[2 * at]), DOTS<F, 4>(w, q)),        \
                        _mm256_add_epi32(_mm256_set1_epi32(-32 * x.half_sums[2 * at + 1]), DOTS<F, 4>(w + 4, q + 16))}; \
                    const __m256 both = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[0]), first,                      \
                                                        _mm256_mul_ps(_mm256_cvtepi32_ps(sums[1]), second));     \
                    acc[r] = _mm256_fmadd_ps(both, _mm256_set1_ps(x.scale[at]), acc[r]);                         \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + r * out_stride, _mm256_sub_ps(acc[r], mins[r]));

template <QuantFormat F, int R>
LUMINAL_AVX2 void k_interleaved_rows_avx2(const std::byte* group, const Q8Rows& x, std::int64_t i0, float* out,
                                          std::int64_t out_stride) {
    LUMINAL_K_INTERLEAVED_ROWS_BODY(k_dots_avx2)
}
template <QuantFormat F, int R>
LUMINAL_VNNI void k_interleaved_rows_vnni(const std::byte* group, const Q8Rows& x, std::int64_t i0, float* out,
                                          std::int64_t out_stride) {
    LUMINAL_K_INTERLEAVED_ROWS_BODY(k_dots_vnni)
}
#undef LUMINAL_K_INTERLEAVED_ROWS_BODY

}  // namespace simd_detail
#endif

}  // namespace luminal::cpu::quant

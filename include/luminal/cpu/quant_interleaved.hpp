#pragma once
// Weights of the 32-element block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
// repacked at load with 8 rows interleaved (the K formats' tiles and
// kernels: quant_interleaved_k.hpp), so that one vector instruction
// works on 8 weight rows: a 256-bit register holds 4 quants of each of the 8
// rows, an activation's 4 int8 are broadcast to all lanes, and vpdpbusd (or
// vpmaddubsw + vpmaddwd on AVX2) leaves each row's dot product in its own
// lane. Scales and offsets then apply to 8 rows per FMA, and the 8 outputs
// leave in one store: no horizontal sums. A tile of 4 activation rows reuses
// each weight register 4 times (the GEMM shape of a prompt); there, on
// AVX512-VNNI, Q8_0 and the K formats take two row groups at a time, 16 rows
// to a 512-bit register.
//
// Layout: row group g (rows 8g .. 8g+7) at g * 8 * row_bytes; rows after the
// last whole group stay as the file has them, at the same offsets; in a group, block
// column b is a tile of 8 * block_bytes at b * 8 * block_bytes (the same bytes
// as the file's 8 blocks, so memory stays at the file's size):
//   d[8]  f16 scales, row r at 2r
//   m[8]  f16 offsets (Q4_1, Q5_1)
//   h[8]  u32 fifth bits (Q5_0, Q5_1), row r's bit for element e at fifth_bit_position(e)
//   quants, 32-byte vectors: Q8_0's vector j holds, at 4r, row r's int8 elements 4j..4j+3
//          (j < 8); Q4/Q5's vector j (j < 4) row r's packed bytes 4j..4j+3, whose low
//          nibbles are elements 4j.. and high nibbles elements 16 + 4j..
// pack_tile and unpack_tile convert exactly both ways; the portable path
// unpacks a row group and runs the block kernels on it.
#include <cstdint>
#include <cstring>
#include <vector>

#include "luminal/cpu/quant_interleaved_k.hpp"
#include "luminal/cpu/quant_interleaved_k16.hpp"
#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/quant_scalar.hpp"

namespace luminal::cpu::quant {

inline constexpr std::int64_t kInterleave = 8;

template <QuantFormat F>
inline constexpr std::int64_t tile_mins_offset = 2 * kInterleave;
template <QuantFormat F>
inline constexpr std::int64_t tile_high_offset = tile_mins_offset<F> + (has_offset<F> ? 2 * kInterleave : 0);
template <QuantFormat F>
inline constexpr std::int64_t tile_quants_offset = tile_high_offset<F> + (has_fifth_bits<F> ? 4 * kInterleave : 0);
template <QuantFormat F>
inline constexpr std::int64_t quant_bytes = F == QuantFormat::Q8_0 ? 32 : 16;

// Where element e's fifth bit goes in the repacked u32: byte k, bit t, where
// the element is byte k of the 4 that quant vector t (t < 4: low nibbles,
// t >= 4: high nibbles of vector t - 4) gives a lane.
constexpr int fifth_bit_position(int e) {
    const int t = e < 16 ? e / 4 : 4 + (e - 16) / 4, k = e % 4;
    return 8 * k + t;
}

// The 8 blocks at blocks + r * block_bytes (rows 0..7, one block column) as a tile.
template <QuantFormat F>
inline void pack_tile(const std::byte* blocks, std::byte* tile) {
    if constexpr (is_k_format<F>) return pack_k_tile<F>(blocks, tile);
    constexpr std::int64_t bb = block_bytes<F>;
    for (int r = 0; r < kInterleave; ++r) {
        const std::byte* block = blocks + r * bb;
        std::memcpy(tile + 2 * r, block, 2);
        if constexpr (has_offset<F>) std::memcpy(tile + tile_mins_offset<F> + 2 * r, block + 2, 2);
        if constexpr (has_fifth_bits<F>) {
            std::uint32_t bits = 0, moved = 0;
            std::memcpy(&bits, block + quants_offset<F> - 4, 4);
            for (int e = 0; e < 32; ++e) moved |= ((bits >> e) & 1u) << fifth_bit_position(e);
            std::memcpy(tile + tile_high_offset<F> + 4 * r, &moved, 4);
        }
        for (int j = 0; j < quant_bytes<F> / 4; ++j)
            std::memcpy(tile + tile_quants_offset<F> + 32 * j + 4 * r, block + quants_offset<F> + 4 * j, 4);
    }
}

// The inverse of pack_tile.
template <QuantFormat F>
inline void unpack_tile(const std::byte* tile, std::byte* blocks) {
    if constexpr (is_k_format<F>) return unpack_k_tile<F>(tile, blocks);
    constexpr std::int64_t bb = block_bytes<F>;
    for (int r = 0; r < kInterleave; ++r) {
        std::byte* block = blocks + r * bb;
        std::memcpy(block, tile + 2 * r, 2);
        if constexpr (has_offset<F>) std::memcpy(block + 2, tile + tile_mins_offset<F> + 2 * r, 2);
        if constexpr (has_fifth_bits<F>) {
            std::uint32_t moved = 0, bits = 0;
            std::memcpy(&moved, tile + tile_high_offset<F> + 4 * r, 4);
            for (int e = 0; e < 32; ++e) bits |= ((moved >> fifth_bit_position(e)) & 1u) << e;
            std::memcpy(block + quants_offset<F> - 4, &bits, 4);
        }
        for (int j = 0; j < quant_bytes<F> / 4; ++j)
            std::memcpy(block + quants_offset<F> + 4 * j, tile + tile_quants_offset<F> + 32 * j + 4 * r, 4);
    }
}

// Row groups [g0, g1) of a [rows, k] matrix of blocks, repacked into `out`
// (the same offsets: group g at g * 8 * row_bytes).
template <QuantFormat F>
inline void interleave_groups(const std::byte* blocks, std::int64_t k, std::int64_t g0, std::int64_t g1,
                              std::byte* out) {
    constexpr std::int64_t bb = block_bytes<F>;
    const std::int64_t per_row = k / block_elements<F>, row_bytes = per_row * bb;
    std::byte column[kInterleave * bb];
    for (std::int64_t g = g0; g < g1; ++g)
        for (std::int64_t b = 0; b < per_row; ++b) {
            for (int r = 0; r < kInterleave; ++r)
                std::memcpy(column + r * bb, blocks + (g * kInterleave + r) * row_bytes + b * bb, bb);
            pack_tile<F>(column, out + g * kInterleave * row_bytes + b * kInterleave * bb);
        }
}

// Row group `group` (8 * row_bytes repacked bytes) as 8 rows of the file's blocks.
template <QuantFormat F>
inline void deinterleave_group(const std::byte* group, std::int64_t k, std::byte* rows) {
    constexpr std::int64_t bb = block_bytes<F>;
    const std::int64_t per_row = k / block_elements<F>, row_bytes = per_row * bb;
    std::byte column[kInterleave * bb];
    for (std::int64_t b = 0; b < per_row; ++b) {
        unpack_tile<F>(group + b * kInterleave * bb, column);
        for (int r = 0; r < kInterleave; ++r) std::memcpy(rows + r * row_bytes + b * bb, column + r * bb, bb);
    }
}

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

// The 8 quant vectors of a tile, vector j to meet the activations' dword j
// (elements 4j..4j+3): Q8_0's int8 as stored, Q4/Q5's values 0..15 or 0..31.
template <QuantFormat F>
LUMINAL_AVX2 inline void tile_values(const std::byte* tile, __m256i* w) {
    const auto* q = reinterpret_cast<const __m256i*>(tile + tile_quants_offset<F>);
    if constexpr (F == QuantFormat::Q8_0) {
        for (int j = 0; j < 8; ++j) w[j] = _mm256_loadu_si256(q + j);
    } else {
        const __m256i low_nibble = _mm256_set1_epi8(0x0F);
        for (int j = 0; j < 4; ++j) {
            const __m256i v = _mm256_loadu_si256(q + j);
            w[j] = _mm256_and_si256(v, low_nibble);
            w[4 + j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
        }
        if constexpr (has_fifth_bits<F>) {
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + tile_high_offset<F>));
            const __m256i bit4 = _mm256_set1_epi8(0x10);
            w[0] = _mm256_or_si256(w[0], _mm256_and_si256(_mm256_slli_epi32(h, 4), bit4));
            w[1] = _mm256_or_si256(w[1], _mm256_and_si256(_mm256_slli_epi32(h, 3), bit4));
            w[2] = _mm256_or_si256(w[2], _mm256_and_si256(_mm256_slli_epi32(h, 2), bit4));
            w[3] = _mm256_or_si256(w[3], _mm256_and_si256(_mm256_slli_epi32(h, 1), bit4));
            w[4] = _mm256_or_si256(w[4], _mm256_and_si256(h, bit4));
            w[5] = _mm256_or_si256(w[5], _mm256_and_si256(_mm256_srli_epi32(h, 1), bit4));
            w[6] = _mm256_or_si256(w[6], _mm256_and_si256(_mm256_srli_epi32(h, 2), bit4));
            w[7] = _mm256_or_si256(w[7], _mm256_and_si256(_mm256_srli_epi32(h, 3), bit4));
        }
    }
}

// Per lane (a row) the sum of the block's 32 products w * x, the activations
// at q; Q8_0's signed weights through the |w|, sign(x, w) identity (u8 x s8 is
// what the instructions take), in two chains so a row is not bound by latency.
#define LUMINAL_Q8_0_DOTS(DOT_ADD)                                                                  \
    __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};                            \
    for (int j = 0; j < 8; ++j) {                                                                  \
        std::int32_t four;                                                                         \
        std::memcpy(&four, q + 4 * j, 4);                                                          \
        const __m256i x = _mm256_sign_epi8(_mm256_set1_epi32(four), w[j]);                         \
        sums[j & 1] = DOT_ADD(sums[j & 1], _mm256_sign_epi8(w[j], w[j]), x);                       \
    }                                                                                              \
    return _mm256_add_epi32(sums[0], sums[1]);

LUMINAL_AVX2 inline __m256i madd_add_avx2(__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
}
LUMINAL_VNNI inline __m256i dpbusd_add(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_epi32(acc, w, x); }

template <QuantFormat F>
LUMINAL_AVX2 inline __m256i block_dots_avx2(const __m256i* w, const std::int8_t* q) {
    if constexpr (F == QuantFormat::Q8_0) {
        LUMINAL_Q8_0_DOTS(madd_add_avx2)
    } else {
        return unsigned_dots_avx2<8, has_fifth_bits<F> ? 31 : 15>(w, q);
    }
}
template <QuantFormat F>
LUMINAL_VNNI inline __m256i block_dots_vnni(const __m256i* w, const std::int8_t* q) {
    if constexpr (F == QuantFormat::Q8_0) {
        LUMINAL_Q8_0_DOTS(dpbusd_add)
    } else {
        return unsigned_dots_vnni<8>(w, q);
    }
}
#undef LUMINAL_Q8_0_DOTS

// The 8 rows of `group` times activation rows i0 .. i0+R-1: out[r * out_stride + 0..7].
#define LUMINAL_INTERLEAVED_ROWS_BODY(DOTS)                                                                   \
    constexpr std::int64_t bb = block_bytes<F>;                                                            \
    __m256 acc[R], offset_acc[R];                                                                          \
    for (int r = 0; r < R; ++r) acc[r] = offset_acc[r] = _mm256_setzero_ps();                              \
    for (std::int64_t b = 0; b < x.blocks; ++b) {                                                          \
        const std::byte* tile = group + b * kInterleave * bb;                                              \
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));        \
        /* times the activations' sums: Q4_0's -8 d, Q5_0's -16 d, the offset m */                         \
        [[maybe_unused]] const __m256 offset_w =                                                           \
            F == QuantFormat::Q4_0   ? _mm256_mul_ps(_mm256_set1_ps(-8), dw)                               \
            : F == QuantFormat::Q5_0 ? _mm256_mul_ps(_mm256_set1_ps(-16), dw)                              \
            : has_offset<F>          ? _mm256_cvtph_ps(_mm_loadu_si128(                                    \
                                  reinterpret_cast<const __m128i*>(tile + tile_mins_offset<F>)))           \
                                     : dw;                                                                 \
        __m256i w[8];                                                                                      \
        tile_values<F>(tile, w);                                                                           \
        for (int r = 0; r < R; ++r) {                                                                      \
            const std::int64_t at = (i0 + r) * x.blocks + b;                                               \
            const std::int8_t* q = x.q.data() + at * kQuantBlock;                                          \
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOTS<F>(w, q)),                                    \
                                     _mm256_mul_ps(dw, _mm256_set1_ps(x.scale[at])), acc[r]);              \
            if constexpr (F != QuantFormat::Q8_0)                                                          \
                offset_acc[r] = _mm256_fmadd_ps(offset_w, _mm256_set1_ps(x.sum[at]), offset_acc[r]);       \
        }                                                                                                  \
    }                                                                                                      \
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + r * out_stride, _mm256_add_ps(acc[r], offset_acc[r]));

template <QuantFormat F, int R>
LUMINAL_AVX2 void interleaved_rows_avx2(const std::byte* group, const Q8Rows& x, std::int64_t i0, float* out,
                                        std::int64_t out_stride) {
    if constexpr (is_k_format<F>) {
        k_interleaved_rows_avx2<F, R>(group, x, i0, out, out_stride);
    } else {
        LUMINAL_INTERLEAVED_ROWS_BODY(block_dots_avx2)
    }
}
template <QuantFormat F, int R>
LUMINAL_VNNI void interleaved_rows_vnni(const std::byte* group, const Q8Rows& x, std::int64_t i0, float* out,
                                        std::int64_t out_stride) {
    if constexpr (is_k_format<F>) {
        k_interleaved_rows_vnni<F, R>(group, x, i0, out, out_stride);
    } else {
        LUMINAL_INTERLEAVED_ROWS_BODY(block_dots_vnni)
    }
}
#undef LUMINAL_INTERLEAVED_ROWS_BODY

// The 16 rows of Q8_0 row groups at a and b times activation rows i0 .. i0+R-1:
// out[r * out_stride + 0..15] (rows of a, then of b). The 8-row body's
// arithmetic 16 lanes wide, the signed weights as |w| against x negated where
// w < 0 (AVX-512 has no byte sign instruction).
template <int R>
LUMINAL_VNNI void q8_0_interleaved_rows16_vnni(const std::byte* a, const std::byte* b, const Q8Rows& x,
                                               std::int64_t i0, float* out, std::int64_t out_stride) {
    constexpr QuantFormat F = QuantFormat::Q8_0;
    constexpr std::int64_t tile_bytes = kInterleave * block_bytes<F>;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (std::int64_t blk = 0; blk < x.blocks; ++blk) {
        const std::byte* ta = a + blk * tile_bytes;
        const std::byte* tb = b + blk * tile_bytes;
        const __m512 dw = f16_lanes16(ta, tb, 0);
        __m512i w[8];
        __mmask64 negative[8];
        for (int j = 0; j < 8; ++j) {
            w[j] = pair_at(ta, tb, tile_quants_offset<F> + 32 * j);
            negative[j] = _mm512_movepi8_mask(w[j]);
            w[j] = _mm512_abs_epi8(w[j]);
        }
        for (int r = 0; r < R; ++r) {
            const std::int64_t at = (i0 + r) * x.blocks + blk;
            const std::int8_t* q = x.q.data() + at * kQuantBlock;
            __m512i sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            for (int j = 0; j < 8; ++j) {
                std::int32_t four;
                std::memcpy(&four, q + 4 * j, 4);
                const __m512i activations = _mm512_set1_epi32(four);
                const __m512i signed_activations =
                    _mm512_mask_sub_epi8(activations, negative[j], _mm512_setzero_si512(), activations);
                sums[j & 1] = _mm512_dpbusd_epi32(sums[j & 1], w[j], signed_activations);
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sums[0], sums[1])),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(x.scale[at])), acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * out_stride, acc[r]);
}

// Formats whose prompt products take two row groups at a time. Pairing the 4-
// and 5-bit 32-element formats measured slower (SmolLM2-135M Q4_0 and Q4_1,
// 256-token prompt: 5-7% on the TTFT), Q8_0 faster (7%).
template <QuantFormat F>
inline constexpr bool pairs_row_groups = is_k_format<F> || F == QuantFormat::Q8_0;

template <QuantFormat F, int R>
LUMINAL_VNNI void interleaved_rows16_vnni(const std::byte* a, const std::byte* b, const Q8Rows& x, std::int64_t i0,
                                          float* out, std::int64_t out_stride) {
    if constexpr (is_k_format<F>)
        k_interleaved_rows16_vnni<F, R>(a, b, x, i0, out, out_stride);
    else
        q8_0_interleaved_rows16_vnni<R>(a, b, x, i0, out, out_stride);
}

// Activation rows from which the product takes two groups at a time. A GEMV
// (decode) streams the weights from memory, and reading two groups side by side
// halved its speed there (11.4 against 6.7 ms for a 49152 x 2048 Q6_K matrix,
// 5.3 against 2.5 ms for Q4_K; in cache it was 15-20% faster): one group after
// another is one sequential stream.
inline constexpr std::int64_t kPairedRows = 4;

template <QuantFormat F>
LUMINAL_AVX2 void interleaved_product_avx2(const ProductTask& t, const Q8Rows& x) {
    LUMINAL_ROW_TILES(interleaved_rows_avx2, kInterleave)
}

// Weight rows [t.j_begin, t.j_end) (whole groups) on AVX512-VNNI: with at least
// kPairedRows activation rows two groups at a time where the format pairs, else
// (and a last odd group) through the 8-row kernel.
template <QuantFormat F>
LUMINAL_VNNI void interleaved_product_vnni(const ProductTask& t, const Q8Rows& x) {
    std::int64_t j = t.j_begin;
    if constexpr (pairs_row_groups<F>) {
        for (; x.rows >= kPairedRows && j + 2 * kInterleave <= t.j_end; j += 2 * kInterleave) {
            const std::byte* a = t.weight + j * t.row_bytes;
            const std::byte* b = a + kInterleave * t.row_bytes;
            std::int64_t i = 0;
            for (; i + 4 <= x.rows; i += 4)
                interleaved_rows16_vnni<F, 4>(a, b, x, i, t.out + i * t.out_stride + j, t.out_stride);
            for (; i + 2 <= x.rows; i += 2)
                interleaved_rows16_vnni<F, 2>(a, b, x, i, t.out + i * t.out_stride + j, t.out_stride);
            for (; i < x.rows; ++i) interleaved_rows16_vnni<F, 1>(a, b, x, i, t.out + i * t.out_stride + j, t.out_stride);
        }
    }
    for (; j < t.j_end; j += kInterleave) {
        const std::byte* w = t.weight + j * t.row_bytes;
        std::int64_t i = 0;
        for (; i + 4 <= x.rows; i += 4) interleaved_rows_vnni<F, 4>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);
        for (; i + 2 <= x.rows; i += 2) interleaved_rows_vnni<F, 2>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);
        for (; i < x.rows; ++i) interleaved_rows_vnni<F, 1>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);
    }
}

}  // namespace simd_detail
#endif

// The product with Q8 activations of repacked weight rows [j_begin, j_end)
// (multiples of 8, whole groups; t.weight the repacked matrix, t.row_bytes a row's
// bytes) on `isa`; the portable path unpacks each row group and runs the block kernel.
// Interleaved Q6_K needs x.half_sums (sum_halves).
template <QuantFormat F>
void interleaved_q8_product(Isa isa, const ProductTask& t, const Q8Rows& x) {
#ifdef LUMINAL_QUANT_X86
    if (isa == Isa::Avx512Vnni) return simd_detail::interleaved_product_vnni<F>(t, x);
    if (isa == Isa::Avx2) return simd_detail::interleaved_product_avx2<F>(t, x);
#endif
    (void)isa;
    std::vector<std::byte> rows(static_cast<std::size_t>(kInterleave * t.row_bytes));
    for (std::int64_t j = t.j_begin; j < t.j_end; j += kInterleave) {
        deinterleave_group<F>(t.weight + j * t.row_bytes, t.k, rows.data());
        q8_product_scalar<F>(ProductTask{rows.data(), t.row_bytes, t.k, 0, kInterleave, t.out + j, t.out_stride}, x);
    }
}

}  // namespace luminal::cpu::quant

#pragma once
// The block products of quant_scalar.hpp with x86 vector instructions,
// for the instruction set asked for (quant_isa.hpp says which this CPU
// runs), and the calls that dispatch between them and the scalar ones:
//
//  * Avx2: a weight block's 32 values in one 256-bit register, multiplied with
//    the int8 activations by vpmaddubsw (u8 x s8 pairs to i16) and vpmaddwd
//    (to i32); Q8_0's signed weights go through the |w|, sign(x, w) identity;
//    Q5's fifth bits are spread from their u32 to one byte each.
//  * Avx512Vnni: the same with vpdpbusd (u8 x s8, four products summed into
//    i32 in one instruction; AVX512-VNNI with AVX512VL's 256-bit form).
// Up to 4 activation rows share each decoded weight block. The K formats'
// kernels are in quant_simd_k.hpp.
#include <cstdint>

#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/quant_scalar.hpp"
#include "luminal/cpu/quant_simd_k.hpp"

namespace luminal::cpu::quant {

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

// Bit e of the u32 at p as byte e: 0x10 where set, 0 where clear.
LUMINAL_AVX2 inline __m256i fifth_bits(const std::byte* p) {
    std::uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    // Byte e takes byte e / 8 of the word, then tests bit e % 8 of it.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                  0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// A weight block's 32 values: Q8_0's int8 as they are, Q4's nibbles as bytes
// 0-15 (elements 0-15 from the low nibbles, 16-31 from the high ones), Q5's
// with their fifth bits.
template <QuantFormat F>
LUMINAL_AVX2 inline __m256i block_values(const std::byte* block) {
    const std::byte* q = block + quants_offset<F>;
    if constexpr (F == QuantFormat::Q8_0) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    } else {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
        const __m256i nibbles = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
        if constexpr (has_fifth_bits<F>) return _mm256_or_si256(nibbles, fifth_bits(q - 4));
        else return nibbles;
    }
}

// The f16 at byte 0 of 8 consecutive blocks (`first`, then every
// block_bytes<F>) as 8 floats: one gather of the dwords there, their low halves.
template <QuantFormat F>
LUMINAL_AVX2 inline __m256 f16_of_8_blocks(const std::byte* first) {
    const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(static_cast<int>(block_bytes<F>)));
    const __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(first), at, 1);
    const __m256i halves = _mm256_shuffle_epi8(words, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1,
                                                                       -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1,
                                                                       -1, -1, -1, -1, -1));
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(halves, 0b1000)));
}

// [sum of d[0]'s lanes, .., sum of d[7]'s lanes].
LUMINAL_AVX2 inline __m256i lane_sums_of_8(const __m256i* d) {
    const __m256i low = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    const __m256i high = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
    return _mm256_set_m128i(_mm_add_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1)),
                            _mm_add_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1)));
}

// R activation rows starting at i0 times weight row w: out[r * out_stride].
// One body for both ISAs: Dot is dot_avx2 or dot_vnni. Blocks go in groups of
// 8: their integer sums are reduced to one lane per block, so the scales (a
// gather of the 8 weight scales, the activations' as loaded) and offsets are
// applied 8 blocks per instruction rather than one scalar at a time. The last
// blocks go one by one, even and odd apart, so a single row (decode) is not
// bound by the latency of one chain of FMAs.
#define LUMINAL_Q8_ROWS_BODY(DOT)                                                                         \
    __m256 acc[R][2], grouped[R], grouped_offset[R];                                                      \
    float offset[R][2];                                                                                   \
    for (int r = 0; r < R; ++r) {                                                                         \
        grouped[r] = grouped_offset[r] = _mm256_setzero_ps();                                             \
        for (int h = 0; h < 2; ++h) acc[r][h] = _mm256_setzero_ps(), offset[r][h] = 0;                    \
    }                                                                                                     \
    std::int64_t b = 0;                                                                                   \
    for (; b + 8 <= x.blocks; b += 8) {                                                                   \
        const std::byte* first = w + b * block_bytes<F>;                                                  \
        __m256i values[8];                                                                                \
        for (int g = 0; g < 8; ++g) values[g] = block_values<F>(first + g * block_bytes<F>);              \
        const __m256 dw = f16_of_8_blocks<F>(first);                                                      \
        /* times the activations' sums: Q4_0's -8 d, Q5_0's -16 d, the minimum m */                         \
        [[maybe_unused]] const __m256 offset_scale =                                                      \
            F == QuantFormat::Q4_0 ? _mm256_mul_ps(_mm256_set1_ps(-8), dw)                                \
            : F == QuantFormat::Q5_0 ? _mm256_mul_ps(_mm256_set1_ps(-16), dw)                             \
            : has_offset<F>          ? f16_of_8_blocks<F>(first + 2)                                      \
                                     : dw;                                                                \
        for (int r = 0; r < R; ++r) {                                                                     \
            const std::int64_t at = (i0 + r) * x.blocks + b;                                              \
            __m256i dots[8];                                                                              \
            for (int g = 0; g < 8; ++g)                                                                   \
                dots[g] = DOT<F>(values[g],                                                               \
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + (at + g) * 32))); \
            const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(x.scale.data() + at));                \
            grouped[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums_of_8(dots)), scale, grouped[r]);    \
            if constexpr (F != QuantFormat::Q8_0)                                                         \
                grouped_offset[r] =                                                                       \
                    _mm256_fmadd_ps(offset_scale, _mm256_loadu_ps(x.sum.data() + at), grouped_offset[r]);  \
        }                                                                                                 \
    }                                                                                                     \
    for (; b < x.blocks; ++b) {                                                                           \
        const int h = static_cast<int>(b & 1);                                                            \
        const std::byte* block = w + b * block_bytes<F>;                                                  \
        const __m256i values = block_values<F>(block);                                                    \
        const float dw = f16(block);                                                                      \
        [[maybe_unused]] const float mw = has_offset<F> ? f16(block + 2) : 0.0f;                           \
        for (int r = 0; r < R; ++r) {                                                                     \
            const std::int64_t at = (i0 + r) * x.blocks + b;                                              \
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + at * 32)); \
            const __m256 scale = _mm256_set1_ps(dw * x.scale[at]);                                        \
            acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT<F>(values, q)), scale, acc[r][h]);         \
            if constexpr (F == QuantFormat::Q4_0) offset[r][h] -= 8 * dw * x.sum[at];                     \
            if constexpr (F == QuantFormat::Q5_0) offset[r][h] -= 16 * dw * x.sum[at];                    \
            if constexpr (has_offset<F>) offset[r][h] += mw * x.sum[at];                                  \
        }                                                                                                 \
    }                                                                                                     \
    for (int r = 0; r < R; ++r)                                                                           \
        out[r * out_stride] = hsum(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),                     \
                                                 _mm256_add_ps(grouped[r], grouped_offset[r]))) +         \
                              (offset[r][0] + offset[r][1]);

template <QuantFormat F, int R>
LUMINAL_AVX2 void q8_rows_avx2(const std::byte* w, const Q8Rows& x, std::int64_t i0, float* out,
                               std::int64_t out_stride) {
    if constexpr (is_k_format<F>) {
        k_rows_avx2<F, R>(w, x, i0, out, out_stride);
    } else {
        LUMINAL_Q8_ROWS_BODY(dot_avx2)
    }
}

template <QuantFormat F, int R>
LUMINAL_VNNI void q8_rows_vnni(const std::byte* w, const Q8Rows& x, std::int64_t i0, float* out,
                               std::int64_t out_stride) {
    if constexpr (is_k_format<F>) {
        k_rows_vnni<F, R>(w, x, i0, out, out_stride);
    } else {
        LUMINAL_Q8_ROWS_BODY(dot_vnni)
    }
}
#undef LUMINAL_Q8_ROWS_BODY

template <QuantFormat F>
LUMINAL_AVX2 void q8_product_avx2(const ProductTask& t, const Q8Rows& x) {
    LUMINAL_ROW_TILES(q8_rows_avx2, 1)
}

template <QuantFormat F>
LUMINAL_VNNI void q8_product_vnni(const ProductTask& t, const Q8Rows& x) {
    LUMINAL_ROW_TILES(q8_rows_vnni, 1)
}

// quantize_rows (quant_scalar.hpp) with AVX2: the same d, q and sums
// (roundf's half-away-from-zero rounding, computed exactly from the truncation).
LUMINAL_AVX2 inline void quantize_rows_avx2(const float* x, std::int64_t k, std::int64_t stride, std::int64_t begin,
                                            std::int64_t end, Q8Rows& out) {
    const std::int64_t blocks = k / kQuantBlock;
    const __m256 sign_bit = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (std::int64_t i = begin; i < end; ++i)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const float* v = x + i * stride + b * kQuantBlock;
            __m256 values[4], amax = _mm256_setzero_ps();
            for (int c = 0; c < 4; ++c) {
                values[c] = _mm256_loadu_ps(v + 8 * c);
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, values[c]));
            }
            __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
            m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            m = _mm_max_ss(m, _mm_movehdup_ps(m));
            const float d = _mm_cvtss_f32(m) / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
            const __m256 inverse = _mm256_set1_ps(id);
            __m256i q[4], sum = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                const __m256 scaled = _mm256_mul_ps(values[c], inverse);
                const __m256 truncated = _mm256_round_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                const __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, _mm256_sub_ps(scaled, truncated)), half,
                                                  _CMP_GE_OQ);
                const __m256 step = _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(sign_bit, scaled)));
                q[c] = _mm256_cvtps_epi32(_mm256_add_ps(truncated, step));
                sum = _mm256_add_epi32(sum, q[c]);
            }
            // int32 -> int8 in element order: packs interleave 128-bit lanes, the permute undoes it.
            const __m256i words = _mm256_packs_epi32(q[0], q[1]), words_high = _mm256_packs_epi32(q[2], q[3]);
            const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words_high),
                                                              _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + (i * blocks + b) * kQuantBlock), bytes);
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
            out.scale[i * blocks + b] = d;
            out.sum[i * blocks + b] = d * static_cast<float>(_mm_cvtsi128_si32(s));
        }
}

// A block decoded to 4 x 8 floats.
template <QuantFormat F>
LUMINAL_AVX2 inline void decode_block_avx2(const std::byte* block, __m256* out) {
    const std::byte* q = block + quants_offset<F>;
    const __m256 d = _mm256_set1_ps(f16(block));
    if constexpr (F == QuantFormat::Q8_0) {
        for (int c = 0; c < 4; ++c) {
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * c));
            out[c] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)));
        }
    } else if constexpr (has_fifth_bits<F>) {
        const __m256i values = block_values<F>(block);
        const __m128i low = _mm256_castsi256_si128(values), high = _mm256_extracti128_si256(values, 1);
        const __m128i parts[4] = {low, _mm_srli_si128(low, 8), high, _mm_srli_si128(high, 8)};
        for (int c = 0; c < 4; ++c) {
            const __m256 n = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[c]));
            if constexpr (F == QuantFormat::Q5_0) out[c] = _mm256_mul_ps(d, _mm256_sub_ps(n, _mm256_set1_ps(16)));
            else out[c] = _mm256_fmadd_ps(d, n, _mm256_set1_ps(f16(block + 2)));
        }
    } else {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m128i mask = _mm_set1_epi8(0x0F);
        const __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
        const __m128i parts[4] = {low, _mm_srli_si128(low, 8), high, _mm_srli_si128(high, 8)};
        for (int c = 0; c < 4; ++c) {
            const __m256 n = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[c]));
            if constexpr (F == QuantFormat::Q4_0) out[c] = _mm256_mul_ps(d, _mm256_sub_ps(n, _mm256_set1_ps(8)));
            else out[c] = _mm256_fmadd_ps(d, n, _mm256_set1_ps(f16(block + 2)));
        }
    }
}

// Any format's block as block_elements<F> floats.
template <QuantFormat F>
LUMINAL_AVX2 inline void decode_floats_avx2(const std::byte* block, float* out) {
    if constexpr (is_k_format<F>) {
        decode_k_block_avx2<F>(block, out);
    } else {
        __m256 values[4];
        decode_block_avx2<F>(block, values);
        for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + 8 * c, values[c]);
    }
}

// f32 activations, 4 rows per decoded block, times weight rows [j_begin, j_end);
// two accumulators per row so that one row is not bound by FMA latency.
template <QuantFormat F>
LUMINAL_AVX2 void f32_product_avx2(const ProductTask& t, const float* x, std::int64_t m, std::int64_t x_stride) {
    constexpr int kMaxRows = 4;
    constexpr std::int64_t elements = block_elements<F>;
    alignas(32) float decoded[elements];
    for (std::int64_t i0 = 0; i0 < m; i0 += kMaxRows) {
        const int rows = static_cast<int>(std::min<std::int64_t>(kMaxRows, m - i0));
        for (std::int64_t j = t.j_begin; j < t.j_end; ++j) {
            const std::byte* w = t.weight + j * t.row_bytes;
            __m256 acc[kMaxRows][2];
            for (int r = 0; r < rows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (std::int64_t b = 0; b < t.k / elements; ++b) {
                decode_floats_avx2<F>(w + b * block_bytes<F>, decoded);
                for (int r = 0; r < rows; ++r) {
                    const float* xr = x + (i0 + r) * x_stride + b * elements;
                    for (int c = 0; c < elements / 8; ++c)
                        acc[r][c & 1] = _mm256_fmadd_ps(_mm256_load_ps(decoded + 8 * c), _mm256_loadu_ps(xr + 8 * c),
                                                        acc[r][c & 1]);
                }
            }
            for (int r = 0; r < rows; ++r) t.out[(i0 + r) * t.out_stride + j] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
        }
    }
}

template <QuantFormat F>
LUMINAL_AVX2 void decode_rows_avx2(const ProductTask& t, float* panel) {
    for (std::int64_t j = t.j_begin; j < t.j_end; ++j)
        for (std::int64_t b = 0; b < t.k / block_elements<F>; ++b)
            decode_floats_avx2<F>(t.weight + j * t.row_bytes + b * block_bytes<F>,
                                  panel + (j - t.j_begin) * t.k + b * block_elements<F>);
}

}  // namespace simd_detail
#endif

// Rows [begin, end) of x rounded to Q8 blocks (quantize_rows) on `isa`.
inline void quantize_rows(Isa isa, const float* x, std::int64_t k, std::int64_t stride, std::int64_t begin,
                          std::int64_t end, Q8Rows& out) {
#ifdef LUMINAL_QUANT_X86
    if (isa != Isa::Scalar) return simd_detail::quantize_rows_avx2(x, k, stride, begin, end, out);
#endif
    (void)isa;
    quantize_rows(x, k, stride, begin, end, out);
}

// The products on `isa` (which the CPU must support; see supports()).
template <QuantFormat F>
void q8_product(Isa isa, const ProductTask& t, const Q8Rows& x) {
#ifdef LUMINAL_QUANT_X86
    if (isa == Isa::Avx512Vnni) return simd_detail::q8_product_vnni<F>(t, x);
    if (isa == Isa::Avx2) return simd_detail::q8_product_avx2<F>(t, x);
#endif
    (void)isa;
    q8_product_scalar<F>(t, x);
}

// f32 activations; the AVX2 kernel serves the VNNI level too (no integer products here).
template <QuantFormat F>
void f32_product(Isa isa, const ProductTask& t, const float* x, std::int64_t m, std::int64_t x_stride) {
#ifdef LUMINAL_QUANT_X86
    if (isa != Isa::Scalar) return simd_detail::f32_product_avx2<F>(t, x, m, x_stride);
#endif
    (void)isa;
    f32_product_scalar<F>(t, x, m, x_stride);
}

template <QuantFormat F>
void decode_rows(Isa isa, const ProductTask& t, float* panel) {
#ifdef LUMINAL_QUANT_X86
    if (isa != Isa::Scalar) return simd_detail::decode_rows_avx2<F>(t, panel);
#endif
    (void)isa;
    decode_rows_scalar<F>(t, panel);
}

// Calls f with the format as a template argument.
template <typename Fn>
decltype(auto) with_format(QuantFormat f, Fn&& fn) {
    switch (f) {
        case QuantFormat::Q4_0: return fn.template operator()<QuantFormat::Q4_0>();
        case QuantFormat::Q4_1: return fn.template operator()<QuantFormat::Q4_1>();
        case QuantFormat::Q8_0: return fn.template operator()<QuantFormat::Q8_0>();
        case QuantFormat::Q5_0: return fn.template operator()<QuantFormat::Q5_0>();
        case QuantFormat::Q5_1: return fn.template operator()<QuantFormat::Q5_1>();
        case QuantFormat::Q4_K: return fn.template operator()<QuantFormat::Q4_K>();
        case QuantFormat::Q6_K: return fn.template operator()<QuantFormat::Q6_K>();
        default: throw Error("quantized weights", fmt::format("the CPU has no kernel for {}", io::name_of(f)));
    }
}

}  // namespace luminal::cpu::quant

#pragma once
// Block products of quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K;
// lowering/quantized.hpp) in portable C++: the path every CPU runs, and what
// the tests hold the SIMD paths (quant_simd.hpp) to.
//
// A weight row of k elements is k / 32 activation blocks. With 8-bit
// activations each block of a row of x is d_x (f32) and 32 int8 q_x, plus
// s_x = d_x * sum(q_x), so that for a weight block with scale d_w (and
// Q4_1's offset m_w):
//   Q8_0: d_w d_x sum(q_w q_x)
//   Q4_0: d_w d_x sum(n q_x) - 8 d_w s_x          (n: the 4-bit values, x = d (n - 8))
//   Q4_1: d_w d_x sum(n q_x) + m_w s_x            (x = d n + m)
//   Q5_0, Q5_1: as Q4_0 (offset 16) and Q4_1, n the 5-bit values
// A K super-block of 256 meets eight activation blocks, one per 32-element
// group g of its quants:
//   Q4_K: (d sc_g) d_x sum(n q_x) - (dmin m_g) s_x   (x = d sc_g n - dmin m_g)
//   Q6_K: d d_x (sc_2g sum_lo(v q_x) + sc_2g+1 sum_hi(v q_x))
//         (v = q - 32, x = d sc v; the group's two halves of 16 have their own scale)
// With f32 activations a block is decoded to floats and multiplied.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/lowering/quantized.hpp"

namespace luminal::cpu::quant {

// Rows of activations rounded to Q8 blocks: row i's block b is scale[i * blocks + b],
// sum[i * blocks + b] (= scale * the sum of its quants) and q[(i * blocks + b) * 32 ..].
struct Q8Rows {
    std::int64_t rows = 0, blocks = 0;
    std::vector<float> scale, sum;
    std::vector<std::int8_t> q;
    std::vector<std::int32_t> half_sums;  // each 16 quants' sum; filled only for interleaved Q6_K (sum_halves)
    const std::int8_t* quants(std::int64_t row, std::int64_t block) const {
        return q.data() + (row * blocks + block) * kQuantBlock;
    }
};

// Rounds rows [begin, end) of x ([rows, k], row stride `stride`) into `out`,
// sized for them already; d = max|x| / 127, q = round-half-away(x / d).
inline void quantize_rows(const float* x, std::int64_t k, std::int64_t stride, std::int64_t begin, std::int64_t end,
                          Q8Rows& out) {
    const std::int64_t blocks = k / kQuantBlock;
    for (std::int64_t i = begin; i < end; ++i)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const float* v = x + i * stride + b * kQuantBlock;
            float amax = 0;
            for (std::int64_t e = 0; e < kQuantBlock; ++e) amax = std::max(amax, std::fabs(v[e]));
            const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
            std::int8_t* q = out.q.data() + (i * blocks + b) * kQuantBlock;
            int sum = 0;
            for (std::int64_t e = 0; e < kQuantBlock; ++e) {
                q[e] = static_cast<std::int8_t>(std::round(v[e] * id));
                sum += q[e];
            }
            out.scale[i * blocks + b] = d;
            out.sum[i * blocks + b] = d * static_cast<float>(sum);
        }
}

inline void size_rows(std::int64_t rows, std::int64_t k, Q8Rows& out) {
    out.rows = rows;
    out.blocks = k / kQuantBlock;
    out.scale.resize(static_cast<std::size_t>(rows * out.blocks));
    out.sum.resize(out.scale.size());
    out.q.resize(static_cast<std::size_t>(rows * k));
}

inline float f16_at(const std::byte* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return f16_bits_to_f32(bits);
}

template <QuantFormat F>
inline constexpr std::int64_t block_bytes = io::layout_of(F).block_bytes;
template <QuantFormat F>
inline constexpr std::int64_t block_elements = luminal::block_elements(F);
template <QuantFormat F>
inline constexpr bool is_k_format = F == QuantFormat::Q4_K || F == QuantFormat::Q6_K;
// The most elements one block decodes to.
inline constexpr std::int64_t kMaxBlockElements = 256;
template <QuantFormat F>
inline constexpr bool has_fifth_bits = F == QuantFormat::Q5_0 || F == QuantFormat::Q5_1;
template <QuantFormat F>
inline constexpr bool has_offset = F == QuantFormat::Q4_1 || F == QuantFormat::Q5_1;
// Where a block's quants start: after its f16 scale, Q4_1/Q5_1's f16 offset
// and Q5's 32 fifth bits (a u32 just before the nibbles).
template <QuantFormat F>
inline constexpr std::int64_t quants_offset = 2 + (has_offset<F> ? 2 : 0) + (has_fifth_bits<F> ? 4 : 0);

// The 32 integer values of a weight block: Q8_0's int8, Q4's 4-bit n, Q5's
// 5-bit n (bit e of the u32 before the nibbles is element e's fifth bit).
template <QuantFormat F>
inline void block_values(const std::byte* block, int* values) {
    const std::byte* q = block + quants_offset<F>;
    if constexpr (F == QuantFormat::Q8_0) {
        for (int e = 0; e < 32; ++e) values[e] = static_cast<std::int8_t>(q[e]);
    } else {
        std::uint32_t fifth_bits = 0;
        if constexpr (has_fifth_bits<F>) std::memcpy(&fifth_bits, q - 4, sizeof fifth_bits);
        for (int e = 0; e < 16; ++e) {
            const auto packed = static_cast<std::uint8_t>(q[e]);
            values[e] = (packed & 0x0F) | static_cast<int>(((fifth_bits >> e) & 1) << 4);
            values[e + 16] = (packed >> 4) | static_cast<int>(((fifth_bits >> (e + 16)) & 1) << 4);
        }
    }
}

// Group g (32 elements) of a K super-block as integers: Q4_K's nibbles n,
// Q6_K's v = q - 32 (io::detail::dequantize_q6_k_block has the packing).
template <QuantFormat F>
inline void k_group_values(const std::byte* block, int g, int* values) {
    if constexpr (F == QuantFormat::Q4_K) {
        const std::byte* chunk = block + 16 + 32 * (g / 2);
        for (int l = 0; l < 32; ++l) values[l] = (static_cast<std::uint8_t>(chunk[l]) >> (4 * (g % 2))) & 0x0F;
    } else {
        const int half = g / 4, quarter = g % 4;
        const std::byte* low = block + 64 * half + 32 * (quarter % 2);
        const std::byte* high = block + 128 + 32 * half;
        for (int l = 0; l < 32; ++l) {
            const int nibble = (static_cast<std::uint8_t>(low[l]) >> (4 * (quarter / 2))) & 0x0F;
            const int top = (static_cast<std::uint8_t>(high[l]) >> (2 * quarter)) & 3;
            values[l] = (nibble | (top << 4)) - 32;
        }
    }
}

// Weight row `w` (k / 256 super-blocks) · row `i` of the Q8 activations.
template <QuantFormat F>
float k_q8_row_dot(const std::byte* w, const Q8Rows& x, std::int64_t i) {
    constexpr std::int64_t groups = kMaxBlockElements / kQuantBlock;
    float acc = 0;
    int values[32];
    for (std::int64_t sb = 0; sb < x.blocks / groups; ++sb) {
        const std::byte* block = w + sb * block_bytes<F>;
        int scales[8], mins[8];
        if constexpr (F == QuantFormat::Q4_K) io::detail::unpack_k_scales(block + 4, scales, mins);
        const float d = f16_at(F == QuantFormat::Q4_K ? block : block + 208);
        for (int g = 0; g < groups; ++g) {
            const std::int64_t at = i * x.blocks + sb * groups + g;
            const std::int8_t* q = x.q.data() + at * kQuantBlock;
            k_group_values<F>(block, g, values);
            int low = 0, high = 0;
            for (int l = 0; l < 16; ++l) low += values[l] * q[l];
            for (int l = 16; l < 32; ++l) high += values[l] * q[l];
            if constexpr (F == QuantFormat::Q4_K) {
                acc += d * static_cast<float>(scales[g]) * x.scale[at] * static_cast<float>(low + high) -
                       f16_at(block + 2) * static_cast<float>(mins[g]) * x.sum[at];
            } else {
                const auto scale = [&](int s) { return static_cast<int>(static_cast<std::int8_t>(block[192 + s])); };
                acc += d * x.scale[at] * static_cast<float>(scale(2 * g) * low + scale(2 * g + 1) * high);
            }
        }
    }
    return acc;
}

// Weight row `w` (k / 32 blocks) · row `i` of the Q8 activations.
template <QuantFormat F>
float q8_row_dot(const std::byte* w, const Q8Rows& x, std::int64_t i) {
    if constexpr (is_k_format<F>) {
        return k_q8_row_dot<F>(w, x, i);
    } else {
        float acc = 0;
        int values[32];
        for (std::int64_t b = 0; b < x.blocks; ++b) {
            const std::byte* block = w + b * block_bytes<F>;
            block_values<F>(block, values);
            const std::int8_t* q = x.quants(i, b);
            int dot = 0;
            for (int e = 0; e < 32; ++e) dot += values[e] * q[e];
            const float dw = f16_at(block), dx = x.scale[i * x.blocks + b], sx = x.sum[i * x.blocks + b];
            acc += dw * dx * static_cast<float>(dot);
            if constexpr (F == QuantFormat::Q4_0) acc -= 8 * dw * sx;
            if constexpr (F == QuantFormat::Q5_0) acc -= 16 * dw * sx;
            if constexpr (has_offset<F>) acc += f16_at(block + 2) * sx;
        }
        return acc;
    }
}

// Decodes a block to block_elements<F> floats (as io's decoders do; the K
// formats with them).
template <QuantFormat F>
inline void decode_block(const std::byte* block, float* out) {
    if constexpr (F == QuantFormat::Q4_K) {
        io::detail::dequantize_q4_k_block(block, out);
    } else if constexpr (F == QuantFormat::Q6_K) {
        io::detail::dequantize_q6_k_block(block, out);
    } else {
        int values[32];
        block_values<F>(block, values);
        const float d = f16_at(block);
        for (int e = 0; e < 32; ++e) {
            if constexpr (F == QuantFormat::Q8_0) out[e] = d * static_cast<float>(values[e]);
            if constexpr (F == QuantFormat::Q4_0) out[e] = d * static_cast<float>(values[e] - 8);
            if constexpr (F == QuantFormat::Q5_0) out[e] = d * static_cast<float>(values[e] - 16);
            if constexpr (has_offset<F>) out[e] = d * static_cast<float>(values[e]) + f16_at(block + 2);
        }
    }
}

// Weight row `w` · x (k f32 values).
template <QuantFormat F>
float f32_row_dot(const std::byte* w, const float* x, std::int64_t k) {
    float acc = 0, decoded[kMaxBlockElements];
    for (std::int64_t b = 0; b < k / block_elements<F>; ++b) {
        decode_block<F>(w + b * block_bytes<F>, decoded);
        for (std::int64_t e = 0; e < block_elements<F>; ++e) acc += decoded[e] * x[b * block_elements<F> + e];
    }
    return acc;
}

// What one call computes: out[i * out_stride + j] for rows i of the
// activations and weight rows j in [j_begin, j_end).
struct ProductTask {
    const std::byte* weight;  // row j at weight + j * row_bytes
    std::int64_t row_bytes, k;
    std::int64_t j_begin, j_end;
    float* out;
    std::int64_t out_stride;
};

template <QuantFormat F>
void q8_product_scalar(const ProductTask& t, const Q8Rows& x) {
    for (std::int64_t j = t.j_begin; j < t.j_end; ++j)
        for (std::int64_t i = 0; i < x.rows; ++i)
            t.out[i * t.out_stride + j] = q8_row_dot<F>(t.weight + j * t.row_bytes, x, i);
}

template <QuantFormat F>
void f32_product_scalar(const ProductTask& t, const float* x, std::int64_t m, std::int64_t x_stride) {
    for (std::int64_t j = t.j_begin; j < t.j_end; ++j)
        for (std::int64_t i = 0; i < m; ++i)
            t.out[i * t.out_stride + j] = f32_row_dot<F>(t.weight + j * t.row_bytes, x + i * x_stride, t.k);
}

// Rows [j_begin, j_end) of the weight decoded into panel[(j - j_begin) * k ..].
template <QuantFormat F>
void decode_rows_scalar(const ProductTask& t, float* panel) {
    for (std::int64_t j = t.j_begin; j < t.j_end; ++j)
        for (std::int64_t b = 0; b < t.k / block_elements<F>; ++b)
            decode_block<F>(t.weight + j * t.row_bytes + b * block_bytes<F>,
                            panel + (j - t.j_begin) * t.k + b * block_elements<F>);
}

}  // namespace luminal::cpu::quant

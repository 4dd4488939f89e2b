#pragma once
// Products of a few rows of f32 A (at most kMaxRows per batch: a decode step's
// query rows of one head, or activation rows) with a B read in place, f32 or
// 16-bit (f16, bf16) widened as it is read: attention's reads of the KV cache
// at decode and 16-bit weights. A batch is (A's rows, B, output); B comes in
// two layouts:
//  * rows: B's rows contiguous, B(j, q) at b[j * ldb + q] (the keys of
//    scores = q k^T, a weight [out, in]): 8 rows of B at a time, each with its
//    own vector of partial sums, the 8 reduced together by a transposing add
//    tree into one vector of 8 sums (no horizontal sum per row);
//  * columns: B's columns contiguous, B(j, q) at b[q * ldb + j] (the values of
//    out = weights v): each step of q widens a row piece of B once and adds
//    it, times a[i, q], to up to 4 rows' accumulators.
// Both walk B in blocks of kBlock positions (j for rows, q for columns), every
// batch's piece of a block before the next block. A cache holds each
// position's keys of all heads side by side, so one head's rows are 64
// elements in every few KiB: read head by head over all positions, every row
// is a new DRAM page and the hardware prefetchers see no stream (a decode
// step's attention ran at a third of the memory's bandwidth at any thread
// count). So the next block is asked for (prefetched) in address order while
// this one is computed from cache. The columns layout's positions are cut
// into a fixed number of stripes whose partial sums are added in stripe
// order, so results do not depend on the thread count.
// The vector paths are compiled for their own targets and chosen at run time
// (quant_isa.hpp), so the library needs no -march flag; Isa::Scalar is the
// portable path. Sums are reassociated (vector partial sums), as in any GEMM.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/thread_pool.hpp"

namespace luminal::cpu::few_rows {

// Rows of A at most that take these products; with more, gemm.hpp's tiles,
// which reuse each piece of B for every row, win.
inline constexpr std::int64_t kMaxRows = 8;
// Positions of B per block.
inline constexpr std::int64_t kBlock = 16;
// Stripes of the columns layout's positions (fixed, so the sums' order is too).
inline constexpr std::int64_t kStripes = 8;
// Multiply-adds below which the calling thread runs everything: waking the pool costs more.
inline constexpr std::int64_t kParallelWork = 1 << 15;

template <DType D>
inline float widen(const void* b, std::int64_t at) {
    if constexpr (D == DType::F32) {
        return static_cast<const float*>(b)[at];
    } else {
        const std::uint16_t bits = static_cast<const std::uint16_t*>(b)[at];
        if constexpr (D == DType::BF16) return bf16_bits_to_f32(bits);
        else return f16_bits_to_f32(bits);
    }
}

// Element `at` of a B in dtype D, as an address.
template <DType D>
inline const void* element(const void* b, std::int64_t at) {
    return static_cast<const char*>(b) + at * static_cast<std::int64_t>(size_of(D));
}

// The kernels' arguments: out[i * ldo + j] for i < m, j < n; a[i * lda + q * a_cs]; B(j, q).
struct Operands {
    const float* a;
    std::int64_t lda, a_cs;
    const void* b;
    std::int64_t ldb;
    float* out;
    std::int64_t ldo;
};

namespace scalar {

template <DType D>
void rows(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i) {
            float acc = 0;
            for (std::int64_t q = 0; q < k; ++q) acc += o.a[i * o.lda + q] * widen<D>(o.b, j * o.ldb + q);
            o.out[i * o.ldo + j] = acc;
        }
}

// Adds the product to out.
template <DType D>
void columns(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    for (std::int64_t q = 0; q < k; ++q)
        for (std::int64_t i = 0; i < m; ++i) {
            const float x = o.a[i * o.lda + q * o.a_cs];
            for (std::int64_t j = 0; j < n; ++j) o.out[i * o.ldo + j] += x * widen<D>(o.b, q * o.ldb + j);
        }
}

}  // namespace scalar

#ifdef LUMINAL_QUANT_X86
namespace simd_detail {

// 8 floats of B from element `at`.
template <DType D>
LUMINAL_AVX2 inline __m256 load8(const void* b, std::int64_t at) {
    if constexpr (D == DType::F32) {
        return _mm256_loadu_ps(static_cast<const float*>(b) + at);
    } else {
        const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(b) + at));
        if constexpr (D == DType::F16) return _mm256_cvtph_ps(bits);
        else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    }
}

// 16 floats of B from element `at`, lanes outside `mask` zero (and not read).
template <DType D>
LUMINAL_VNNI inline __m512 load16(const void* b, std::int64_t at, __mmask16 mask) {
    if constexpr (D == DType::F32) {
        return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(b) + at);
    } else {
        const __m256i bits = _mm256_maskz_loadu_epi16(mask, static_cast<const std::uint16_t*>(b) + at);
        if constexpr (D == DType::F16) return _mm512_cvtph_ps(bits);
        else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    }
}

// [sum of v[0]'s lanes, .., sum of v[7]'s lanes].
LUMINAL_AVX2 inline __m256 sums_of_8(const __m256* v) {
    const __m256 low = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 high = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(low, high, 0x20), _mm256_permute2f128_ps(low, high, 0x31));
}

// While 8 rows of B from `b` are read at element q, asks for the next 8 rows'
// line at q into L2: rows back to back (a weight), which prefetch_block leaves
// alone. The hardware's streams stop at every 4 KiB page, and a weight row of
// 2048 bf16 is one: asked for a group ahead, a one-thread bf16 GEMV at the 1B's
// shapes streams 7-20% faster (interleaved medians, 19.5-24.8 GB/s against
// 16.3-22.5). Into L1 the requests evict the rows being read. Inlined by force:
// GCC takes a call holding only prefetches for a pure function and deletes it.
template <DType D>
[[gnu::always_inline]] inline void prefetch_next_rows(const void* b, std::int64_t ldb, std::int64_t q) {
    constexpr std::int64_t line = 64 / static_cast<std::int64_t>(size_of(D));
    if (q % line != 0) return;
    _Pragma("GCC unroll 8") for (int r = 8; r < 16; ++r)
        _mm_prefetch(static_cast<const char*>(element<D>(b, r * ldb + q)), _MM_HINT_T1);
}

inline __mmask16 first_lanes(std::int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << count) - 1);
}

template <DType D>
LUMINAL_VNNI void rows_avx512(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    const std::int64_t whole = k / 16 * 16;
    const __mmask16 tail = first_lanes(k - whole);
    const bool back_to_back = o.ldb == k;
    std::int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (std::int64_t i = 0; i < m; ++i) {
            const float* x = o.a + i * o.lda;
            const void* b = element<D>(o.b, j * o.ldb);
            const bool ahead = back_to_back && i == 0;
            __m512 acc[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r) acc[r] = _mm512_setzero_ps();
            for (std::int64_t q = 0; q < whole; q += 16) {
                if (ahead) prefetch_next_rows<D>(b, o.ldb, q);
                const __m512 xv = _mm512_loadu_ps(x + q);
                _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r)
                    acc[r] = _mm512_fmadd_ps(xv, load16<D>(b, r * o.ldb + q, 0xFFFF), acc[r]);
            }
            if (tail) {
                const __m512 xv = _mm512_maskz_loadu_ps(tail, x + whole);
                _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r)
                    acc[r] = _mm512_fmadd_ps(xv, load16<D>(b, r * o.ldb + whole, tail), acc[r]);
            }
            __m256 halves[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r)
                halves[r] = _mm256_add_ps(_mm512_castps512_ps256(acc[r]),
                                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
            _mm256_storeu_ps(o.out + i * o.ldo + j, sums_of_8(halves));
        }
    for (; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i) {
            __m512 acc = _mm512_setzero_ps();
            for (std::int64_t q = 0; q < k; q += 16) {
                const __mmask16 lanes = first_lanes(k - q);
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, o.a + i * o.lda + q),
                                      load16<D>(o.b, j * o.ldb + q, lanes), acc);
            }
            o.out[i * o.ldo + j] = _mm512_reduce_add_ps(acc);
        }
}

template <DType D>
LUMINAL_AVX2 void rows_avx2(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    const std::int64_t whole = k / 8 * 8;
    const bool back_to_back = o.ldb == k;
    std::int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (std::int64_t i = 0; i < m; ++i) {
            const float* x = o.a + i * o.lda;
            const void* b = element<D>(o.b, j * o.ldb);
            const bool ahead = back_to_back && i == 0;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
            for (std::int64_t q = 0; q < whole; q += 8) {
                if (ahead) prefetch_next_rows<D>(b, o.ldb, q);
                const __m256 xv = _mm256_loadu_ps(x + q);
                _Pragma("GCC unroll 8") for (int r = 0; r < 8; ++r)
                    acc[r] = _mm256_fmadd_ps(xv, load8<D>(b, r * o.ldb + q), acc[r]);
            }
            alignas(32) float sums[8];
            _mm256_store_ps(sums, sums_of_8(acc));
            for (int r = 0; r < 8; ++r) {
                for (std::int64_t q = whole; q < k; ++q) sums[r] += x[q] * widen<D>(b, r * o.ldb + q);
                o.out[i * o.ldo + j + r] = sums[r];
            }
        }
    if (j < n) scalar::rows<D>({o.a, o.lda, 1, element<D>(o.b, j * o.ldb), o.ldb, o.out + j, o.ldo}, m, k, n - j);
}

// Up to 4 rows of A (R) times columns [j0, j0 + 64) of B, the lanes past n masked, added to out.
template <DType D, int R>
LUMINAL_VNNI void columns_tile_avx512(const Operands& o, std::int64_t k, std::int64_t n, std::int64_t j0) {
    __mmask16 lanes[4];
    __m512 acc[R][4];
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c) {
        lanes[c] = first_lanes(n - j0 - 16 * c);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r)
            acc[r][c] = _mm512_maskz_loadu_ps(lanes[c], o.out + r * o.ldo + j0 + 16 * c);
    }
    for (std::int64_t q = 0; q < k; ++q) {
        __m512 w[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c) w[c] = load16<D>(o.b, q * o.ldb + j0 + 16 * c, lanes[c]);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
            const __m512 x = _mm512_set1_ps(o.a[r * o.lda + q * o.a_cs]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(x, w[c], acc[r][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c)
            _mm512_mask_storeu_ps(o.out + r * o.ldo + j0 + 16 * c, lanes[c], acc[r][c]);
}

template <DType D>
LUMINAL_VNNI void columns_avx512(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    for (std::int64_t j0 = 0; j0 < n; j0 += 64) {
        std::int64_t i = 0;
        auto rows_from = [&](std::int64_t first) {
            return Operands{o.a + first * o.lda, o.lda, o.a_cs, o.b, o.ldb, o.out + first * o.ldo, o.ldo};
        };
        for (; i + 4 <= m; i += 4) columns_tile_avx512<D, 4>(rows_from(i), k, n, j0);
        for (; i + 2 <= m; i += 2) columns_tile_avx512<D, 2>(rows_from(i), k, n, j0);
        for (; i < m; ++i) columns_tile_avx512<D, 1>(rows_from(i), k, n, j0);
    }
}

// Up to 4 rows of A (R) times columns [j0, j0 + 8 * vectors) of B, added to out.
template <DType D, int R>
LUMINAL_AVX2 void columns_tile_avx2(const Operands& o, std::int64_t k, std::int64_t j0, int vectors) {
    __m256 acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c)
            acc[r][c] = c < vectors ? _mm256_loadu_ps(o.out + r * o.ldo + j0 + 8 * c) : _mm256_setzero_ps();
    for (std::int64_t q = 0; q < k; ++q) {
        __m256 w[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c)
            w[c] = c < vectors ? load8<D>(o.b, q * o.ldb + j0 + 8 * c) : _mm256_setzero_ps();
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
            const __m256 x = _mm256_set1_ps(o.a[r * o.lda + q * o.a_cs]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(x, w[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < vectors; ++c) _mm256_storeu_ps(o.out + r * o.ldo + j0 + 8 * c, acc[r][c]);
}

template <DType D>
LUMINAL_AVX2 void columns_avx2(const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
    const std::int64_t whole = n / 8 * 8;
    for (std::int64_t j0 = 0; j0 < whole; j0 += 32) {
        const int vectors = static_cast<int>(std::min<std::int64_t>(4, (whole - j0) / 8));
        auto rows_from = [&](std::int64_t first) {
            return Operands{o.a + first * o.lda, o.lda, o.a_cs, o.b, o.ldb, o.out + first * o.ldo, o.ldo};
        };
        std::int64_t i = 0;
        for (; i + 4 <= m; i += 4) columns_tile_avx2<D, 4>(rows_from(i), k, j0, vectors);
        for (; i + 2 <= m; i += 2) columns_tile_avx2<D, 2>(rows_from(i), k, j0, vectors);
        for (; i < m; ++i) columns_tile_avx2<D, 1>(rows_from(i), k, j0, vectors);
    }
    if (whole < n)
        scalar::columns<D>({o.a, o.lda, o.a_cs, element<D>(o.b, whole), o.ldb, o.out + whole, o.ldo}, m, k, n - whole);
}

}  // namespace simd_detail
#endif

// out[i * ldo + j] = sum_q a[i * lda + q] * b[j * ldb + q] (A's rows contiguous).
template <DType D>
void rows_kernel(quant::Isa isa, const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
#ifdef LUMINAL_QUANT_X86
    if (isa == quant::Isa::Avx512Vnni) return simd_detail::rows_avx512<D>(o, m, k, n);
    if (isa == quant::Isa::Avx2) return simd_detail::rows_avx2<D>(o, m, k, n);
#endif
    (void)isa;
    scalar::rows<D>(o, m, k, n);
}

// out[i * ldo + j] += sum_q a[i * lda + q * a_cs] * b[q * ldb + j].
template <DType D>
void columns_kernel(quant::Isa isa, const Operands& o, std::int64_t m, std::int64_t k, std::int64_t n) {
#ifdef LUMINAL_QUANT_X86
    if (isa == quant::Isa::Avx512Vnni) return simd_detail::columns_avx512<D>(o, m, k, n);
    if (isa == quant::Isa::Avx2) return simd_detail::columns_avx2<D>(o, m, k, n);
#endif
    (void)isa;
    scalar::columns<D>(o, m, k, n);
}

// One batch of a batched product: A's rows, B's first element, the output's first row.
struct Batch {
    const float* a;
    const void* b;
    float* out;
};

struct Scratch {
    std::vector<float> stripes;  // the columns layout's partial sums, stripe by stripe
};

// Asks for `length` elements of each batch's B at positions [p0, p1) (each
// position `stride` elements further), position by position. Positions back
// to back (a weight matrix) are left to rows_avx512/rows_avx2, which ask for
// the next rows a line at a time: a block's 64 KiB asked into L1 at once
// evicted the block being computed.
template <DType D>
void prefetch_block(const Batch* batches, std::int64_t count, std::int64_t p0, std::int64_t p1, std::int64_t stride,
                    std::int64_t length) {
#ifdef LUMINAL_QUANT_X86
    if (stride == length) return;
    const std::int64_t bytes = length * static_cast<std::int64_t>(size_of(D));
    for (std::int64_t p = p0; p < p1; ++p)
        for (std::int64_t t = 0; t < count; ++t) {
            const char* at = static_cast<const char*>(element<D>(batches[t].b, p * stride));
            for (std::int64_t line = 0; line < bytes; line += 64) _mm_prefetch(at + line, _MM_HINT_T0);
        }
#else
    (void)batches, (void)count, (void)p0, (void)p1, (void)stride, (void)length;
#endif
}

// Positions [p0, p1) in blocks of kBlock, the next block prefetched while one is
// computed: body(first position, positions).
template <DType D, typename Body>
void by_blocks(const Batch* batches, std::int64_t count, std::int64_t p0, std::int64_t p1, std::int64_t stride,
               std::int64_t length, Body&& body) {
    prefetch_block<D>(batches, count, p0, std::min(p1, p0 + kBlock), stride, length);
    for (std::int64_t p = p0; p < p1; p += kBlock) {
        const std::int64_t next = std::min(p1, p + kBlock);
        prefetch_block<D>(batches, count, next, std::min(p1, next + kBlock), stride, length);
        body(p, next - p);
    }
}

// out[i * ldo + j] = sum_q a[i * lda + q] * B(j, q) for every batch, B(j, q) =
// b[j * ldb + q] in dtype D (elements); m <= kMaxRows, A's rows contiguous.
template <DType D>
void rows_product(quant::Isa isa, const Batch* batches, std::int64_t count, std::int64_t m, std::int64_t k,
                  std::int64_t lda, std::int64_t n, std::int64_t ldb, std::int64_t ldo, ThreadPool* pool) {
    auto run = [&](std::int64_t b0, std::int64_t b1) {
        by_blocks<D>(batches, count, b0 * kBlock, std::min(n, b1 * kBlock), ldb, k, [&](std::int64_t j, std::int64_t cols) {
            for (std::int64_t t = 0; t < count; ++t)
                rows_kernel<D>(isa, {batches[t].a, lda, 1, element<D>(batches[t].b, j * ldb), ldb, batches[t].out + j, ldo},
                               m, k, cols);
        });
    };
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    if (!pool || pool->size() == 1 || count * m * n * k < kParallelWork) return run(0, blocks);
    pool->parallel_for(blocks, 1, run);
}

// out[i * ldo + j] = sum_q a[i * lda + q * a_cs] * B(j, q) for every batch, B(j, q) = b[q * ldb + j].
template <DType D>
void columns_product(quant::Isa isa, const Batch* batches, std::int64_t count, std::int64_t m, std::int64_t k,
                     std::int64_t lda, std::int64_t a_cs, std::int64_t n, std::int64_t ldb, std::int64_t ldo,
                     Scratch& scratch, ThreadPool* pool) {
    const std::int64_t per_batch = m * n, stripes = std::clamp<std::int64_t>(k / kBlock, 1, kStripes);
    scratch.stripes.assign(static_cast<std::size_t>(stripes * count * per_batch), 0.0f);
    auto run = [&](std::int64_t s0, std::int64_t s1) {
        for (std::int64_t s = s0; s < s1; ++s) {
            float* acc = scratch.stripes.data() + s * count * per_batch;
            by_blocks<D>(batches, count, k * s / stripes, k * (s + 1) / stripes, ldb, n, [&](std::int64_t q, std::int64_t depth) {
                for (std::int64_t t = 0; t < count; ++t)
                    columns_kernel<D>(isa, {batches[t].a + q * a_cs, lda, a_cs, element<D>(batches[t].b, q * ldb), ldb,
                                            acc + t * per_batch, n}, m, depth, n);
            });
        }
    };
    if (!pool || pool->size() == 1 || count * m * n * k < kParallelWork) run(0, stripes);
    else pool->parallel_for(stripes, 1, run);
    for (std::int64_t t = 0; t < count; ++t)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                float sum = 0;
                for (std::int64_t s = 0; s < stripes; ++s) sum += scratch.stripes[(s * count + t) * per_batch + i * n + j];
                batches[t].out[i * ldo + j] = sum;
            }
}

}  // namespace luminal::cpu::few_rows

#pragma once
// f32 GEMM out[i, j] = sum_q a[i, q] * b[j, q] for a B whose rows are
// contiguous (a weight matrix as stored, [out features, in features]): B is
// read in place, never packed, which is where Eigen's GEMM spends a sixth of a
// prefill (it copies the whole weight matrix into its panel layout per call).
// A, the smaller operand (the tokens), is copied transposed into panels of one
// vector of rows (16 on AVX-512, 8 on AVX2), zero-padded. A tile multiplies
// one panel by kTileRows rows of B: per step of q, one vector load of the
// panel and a broadcast of each B row's value into its own accumulator. Sums
// run in q order (in blocks of kDepthBlock, added to the output), so results
// do not depend on the thread count.
// The instruction sets are the quantized kernels' (chosen at run time); on
// any other CPU the caller runs Eigen.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "luminal/cpu/quant_isa.hpp"
#include "luminal/cpu/thread_pool.hpp"

namespace luminal::cpu::gemm_detail {

// Rows of B one tile reads (its accumulators).
template <quant::Isa I>
inline constexpr std::int64_t kTileRows = I == quant::Isa::Avx512Vnni ? 16 : 12;
// Rows of A one panel holds (one vector).
template <quant::Isa I>
inline constexpr std::int64_t kPanelRows = I == quant::Isa::Avx512Vnni ? 16 : 8;

// panels[t][q][r] = a[t * width + r, q], zero past the last row.
inline void pack_panels(const float* a, std::int64_t m, std::int64_t k, std::int64_t rs, std::int64_t cs,
                        std::int64_t width, float* panels) {
    for (std::int64_t t = 0; t * width < m; ++t) {
        float* panel = panels + t * width * k;
        const std::int64_t rows = std::min(width, m - t * width);
        for (std::int64_t r = 0; r < width; ++r) {
            if (r >= rows) {
                for (std::int64_t q = 0; q < k; ++q) panel[q * width + r] = 0.0f;
                continue;
            }
            const float* row = a + (t * width + r) * rs;
            for (std::int64_t q = 0; q < k; ++q) panel[q * width + r] = row[q * cs];
        }
    }
}

// Rows of A at least this many take the kernel; a single row is Eigen's GEMV.
inline constexpr std::int64_t kMinRows = 2;
// Steps of q per pass over the output: a pass's panels (128 rows of A: 384 KiB)
// stay in L2 while every tile of B reads them.
inline constexpr std::int64_t kDepthBlock = 768;
// B's rows at a stride of a multiple of this many floats (2 KiB) fall into at
// most two L1 sets, too few ways for a tile's rows; such a tile (and the last,
// partial one, zero-padded) is copied for each block of q at kCopyStride.
inline constexpr std::int64_t kAliasingStride = 512;
inline constexpr std::int64_t kCopyStride = kDepthBlock + 16;

struct GemmScratch {
    std::vector<float> panels;
};

// The tile's sums land in acc[i][r] (B row i, panel row r); the valid part is
// written to (or, past the first block of q, added to) c[r * ldc + i].
inline void store_tile(const float* acc, std::int64_t width, float* c, std::int64_t ldc, std::int64_t rows,
                       std::int64_t cols, bool accumulate) {
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < cols; ++i)
            c[r * ldc + i] = accumulate ? c[r * ldc + i] + acc[i * width + r] : acc[i * width + r];
}

#ifdef LUMINAL_QUANT_X86

// Whether rowwise_gemm runs for these operands on `isa`.
inline bool applies(quant::Isa isa, std::int64_t m, std::int64_t k, std::int64_t b_cs) {
    return isa != quant::Isa::Scalar && m >= kMinRows && k > 0 && b_cs == 1;
}

// A tile (one panel times ROWS rows of B) for both instruction sets: V is the
// vector type, P its intrinsics' prefix, LANES its floats. B's rows are
// addressed in groups of four (a base pointer plus 0-3 row strides), which
// keeps the loop's pointers in registers.
#define LUMINAL_GEMM_TILE_BODY(V, P, LANES, ROWS)                                         \
    V acc[ROWS];                                                                          \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; ++i) acc[i] = P##_setzero_ps();    \
    const float* groups[ROWS / 4];                                                        \
    for (int g = 0; g < ROWS / 4; ++g) groups[g] = b + 4 * g * ldb;                       \
    for (std::int64_t q = 0; q < k; ++q) {                                                \
        const V x = P##_loadu_ps(panel + q * LANES);                                      \
        _Pragma("GCC unroll 4") for (int g = 0; g < ROWS / 4; ++g) {                      \
            const float* p = groups[g] + q;                                               \
            _Pragma("GCC unroll 4") for (int s = 0; s < 4; ++s)                           \
                acc[4 * g + s] = P##_fmadd_ps(x, P##_set1_ps(p[s * ldb]), acc[4 * g + s]); \
        }                                                                                 \
    }                                                                                     \
    alignas(64) float sums[ROWS * LANES];                                                 \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; ++i) P##_store_ps(sums + i * LANES, acc[i]); \
    store_tile(sums, LANES, c, ldc, rows, cols, accumulate);

LUMINAL_VNNI inline void tile_avx512(const float* panel, const float* b, std::int64_t ldb, std::int64_t k, float* c,
                                     std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
    LUMINAL_GEMM_TILE_BODY(__m512, _mm512, 16, 16)
}

LUMINAL_AVX2 inline void tile_avx2(const float* panel, const float* b, std::int64_t ldb, std::int64_t k, float* c,
                                   std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
    LUMINAL_GEMM_TILE_BODY(__m256, _mm256, 8, 12)
}
#undef LUMINAL_GEMM_TILE_BODY

// out[i * ldc + j] for i < m, j < n; A is m x k with strides (rs, cs); B's
// rows j are b + j * ldb, contiguous; pool (or null) splits B's rows.
template <quant::Isa I>
void rowwise_gemm_on(const float* a, std::int64_t m, std::int64_t k, std::int64_t rs, std::int64_t cs,
                     const float* b, std::int64_t n, std::int64_t ldb, float* out, std::int64_t ldc,
                     GemmScratch& scratch, ThreadPool* pool) {
    constexpr std::int64_t width = kPanelRows<I>, tile_rows = kTileRows<I>;
    const std::int64_t panels = (m + width - 1) / width;
    scratch.panels.resize(static_cast<std::size_t>(panels * width * k));
    pack_panels(a, m, k, rs, cs, width, scratch.panels.data());
    const float* packed = scratch.panels.data();
    const std::int64_t count = (n + tile_rows - 1) / tile_rows;
    for (std::int64_t q0 = 0; q0 < k; q0 += kDepthBlock) {
        const std::int64_t depth = std::min(kDepthBlock, k - q0);
        auto tiles = [&](std::int64_t t0, std::int64_t t1) {
            thread_local std::vector<float> copy;
            for (std::int64_t t = t0; t < t1; ++t) {
                const std::int64_t j = t * tile_rows, cols = std::min(tile_rows, n - j);
                const float* rows_of_b = b + j * ldb + q0;
                std::int64_t stride = ldb;
                if (cols < tile_rows || ldb % kAliasingStride == 0) {
                    copy.resize(static_cast<std::size_t>(tile_rows * kCopyStride));
                    for (std::int64_t i = 0; i < tile_rows; ++i) {
                        float* row = copy.data() + i * kCopyStride;
                        if (i < cols) std::memcpy(row, rows_of_b + i * ldb, static_cast<std::size_t>(depth) * sizeof(float));
                        else std::fill(row, row + depth, 0.0f);
                    }
                    rows_of_b = copy.data();
                    stride = kCopyStride;
                }
                for (std::int64_t p = 0; p < panels; ++p) {
                    const float* panel = packed + (p * k + q0) * width;
                    const std::int64_t rows = std::min(width, m - p * width);
                    float* c = out + p * width * ldc + j;
                    if constexpr (I == quant::Isa::Avx512Vnni)
                        tile_avx512(panel, rows_of_b, stride, depth, c, ldc, rows, cols, q0 > 0);
                    else
                        tile_avx2(panel, rows_of_b, stride, depth, c, ldc, rows, cols, q0 > 0);
                }
            }
        };
        if (!pool || pool->size() == 1) tiles(0, count);
        else pool->parallel_for(count, 1, tiles);
    }
}

inline void rowwise_gemm(quant::Isa isa, const float* a, std::int64_t m, std::int64_t k, std::int64_t rs,
                         std::int64_t cs, const float* b, std::int64_t n, std::int64_t ldb, float* out,
                         std::int64_t ldc, GemmScratch& scratch, ThreadPool* pool) {
    if (isa == quant::Isa::Avx512Vnni)
        rowwise_gemm_on<quant::Isa::Avx512Vnni>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
    else
        rowwise_gemm_on<quant::Isa::Avx2>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
}

#endif

}  // namespace luminal::cpu::gemm_detail

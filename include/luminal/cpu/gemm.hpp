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
// A B of 16-bit floats is read as stored too: each tile's rows widened to f32
// in a copy per block of q, or, where A's values are bf16 as well and the CPU
// has AVX512_BF16, multiplied as bf16 pairs (vdpbf16ps: both products exact,
// summed in f32), which a bf16 model's prompt runs at twice the f32 rate.
// The instruction sets are the quantized kernels' (chosen at run time); on
// any other CPU the caller runs Eigen.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "luminal/core/dtype.hpp"

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
    std::vector<std::uint16_t> pair_panels;  // A's bf16 pairs, for bf16_dot_gemm
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

// The next tile's Rows rows of B, asked into L2 one line per step of a tile's
// loop (line `step` is row step % Rows, 64 bytes at step / Rows), so the next
// tile's copy finds them there. A tile's steps cover the next tile's lines
// when a row's depth fills whole lines (bf16 pairs: 16 rows x 4 bytes per
// step; f32 rows: 4 bytes each per step). Asked for all at once before the
// tile, the requests queued behind each other and the copy still waited on
// DRAM: one thread's m = 64 products at the 1B's shapes run 9-16% faster
// spread out (bf16 pairs 175 GFLOP/s against 160, f32 93 against 80, medians).
// The rows of a last, partial tile past B's end are asked for too: a prefetch
// does not fault.
template <std::int64_t Rows>
struct NextTile {
    const std::byte* first = nullptr;
    std::int64_t row_bytes = 0, lines = 0;  // lines 0: nothing to ask for
    [[gnu::always_inline]] void ask(std::int64_t step) const {
        if (step < lines)
            _mm_prefetch(reinterpret_cast<const char*>(first + (step % Rows) * row_bytes + step / Rows * 64), _MM_HINT_T1);
    }
};

// The tile after Rows rows of B from row j, over [q0, q0 + depth); none past row n.
template <std::int64_t Rows, typename T>
NextTile<Rows> next_tile(const T* b, std::int64_t ldb, std::int64_t j, std::int64_t n, std::int64_t q0, std::int64_t depth) {
    constexpr auto size = static_cast<std::int64_t>(sizeof(T));
    return {reinterpret_cast<const std::byte*>(b + (j + Rows) * ldb + q0), ldb * size,
            j + Rows < n ? Rows * ((depth * size + 63) / 64) : 0};
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
        next.ask(q);                                                                      \
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
                                     std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate,
                                     const NextTile<16>& next) {
    LUMINAL_GEMM_TILE_BODY(__m512, _mm512, 16, 16)
}

LUMINAL_AVX2 inline void tile_avx2(const float* panel, const float* b, std::int64_t ldb, std::int64_t k, float* c,
                                   std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate,
                                   const NextTile<12>& next) {
    LUMINAL_GEMM_TILE_BODY(__m256, _mm256, 8, 12)
}
#undef LUMINAL_GEMM_TILE_BODY

// A bf16 tile for vdpbf16ps: the panel holds pairs of q (see pack_pair_panels),
// and each B row's pair at q is broadcast as one 32-bit lane; each instruction
// adds both products of a pair to the row's accumulator lanes.
LUMINAL_BF16_DOT inline void tile_bf16_dot(const std::uint16_t* panel, const std::uint16_t* b, std::int64_t ldb, std::int64_t k,
                                           float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate,
                                           const NextTile<16>& next) {
    constexpr int kRows = 16, kLanes = 16;
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    const std::uint16_t* groups[kRows / 4];
    for (int g = 0; g < kRows / 4; ++g) groups[g] = b + 4 * g * ldb;
    for (std::int64_t q = 0; q < k; q += 2) {
        next.ask(q / 2);
        const __m512bh x = (__m512bh)_mm512_loadu_si512(panel + q * kLanes);
#pragma GCC unroll 4
        for (int g = 0; g < kRows / 4; ++g) {
            const std::uint16_t* p = groups[g] + q;
#pragma GCC unroll 4
            for (int s = 0; s < 4; ++s) {
                std::int32_t pair;
                std::memcpy(&pair, p + s * ldb, sizeof pair);
                acc[4 * g + s] = _mm512_dpbf16_ps(acc[4 * g + s], x, (__m512bh)_mm512_set1_epi32(pair));
            }
        }
    }
    alignas(64) float sums[kRows * kLanes];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) _mm512_store_ps(sums + i * kLanes, acc[i]);
    store_tile(sums, kLanes, c, ldc, rows, cols, accumulate);
}

// dst[0, n) = src[0, n) (bf16 or f16 bits) widened to f32.
template <DType D>
LUMINAL_AVX2 inline void widen(const std::uint16_t* src, std::int64_t n, float* dst) {
    std::int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
        if constexpr (D == DType::BF16) _mm256_storeu_ps(dst + j, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16)));
        else _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(half));
    }
    for (; j < n; ++j) dst[j] = D == DType::BF16 ? bf16_bits_to_f32(src[j]) : f16_bits_to_f32(src[j]);
}

// Runs tile(t, q0, depth) for every tile of B's n rows (tile_rows each) in
// every block of q, the tiles split over the pool (or null).
template <typename Tile>
void for_each_tile(std::int64_t n, std::int64_t k, std::int64_t tile_rows, ThreadPool* pool, const Tile& tile) {
    const std::int64_t count = (n + tile_rows - 1) / tile_rows;
    for (std::int64_t q0 = 0; q0 < k; q0 += kDepthBlock) {
        const std::int64_t depth = std::min(kDepthBlock, k - q0);
        auto tiles = [&](std::int64_t t0, std::int64_t t1) {
            for (std::int64_t t = t0; t < t1; ++t) tile(t, q0, depth);
        };
        if (!pool || pool->size() == 1) tiles(0, count);
        else pool->parallel_for(count, 1, tiles);
    }
}

// The tile of I's kernel: one panel times a tile of B's rows, read at `stride`.
template <quant::Isa I>
void f32_tile(const float* panel, const float* b, std::int64_t stride, std::int64_t depth, float* c, std::int64_t ldc,
              std::int64_t rows, std::int64_t cols, bool accumulate, const NextTile<kTileRows<I>>& next) {
    if constexpr (I == quant::Isa::Avx512Vnni) tile_avx512(panel, b, stride, depth, c, ldc, rows, cols, accumulate, next);
    else tile_avx2(panel, b, stride, depth, c, ldc, rows, cols, accumulate, next);
}

// How B's values of dtype D are stored: f32, or the bits of a 16-bit float.
template <DType D>
using StoredAs = std::conditional_t<D == DType::F32, float, std::uint16_t>;

// out[i * ldc + j] for i < m, j < n; A is m x k with strides (rs, cs); B's
// rows j are b + j * ldb, contiguous, of dtype D; pool (or null) splits B's
// rows. A 16-bit B (bf16, f16) is widened as each tile's rows are copied per
// block of q, so the matrix is read as stored and never converted whole.
template <quant::Isa I, DType D>
void rowwise_gemm_on(const float* a, std::int64_t m, std::int64_t k, std::int64_t rs, std::int64_t cs,
                     const StoredAs<D>* b, std::int64_t n, std::int64_t ldb, float* out, std::int64_t ldc,
                     GemmScratch& scratch, ThreadPool* pool) {
    constexpr std::int64_t width = kPanelRows<I>, tile_rows = kTileRows<I>;
    const std::int64_t panels = (m + width - 1) / width;
    scratch.panels.resize(static_cast<std::size_t>(panels * width * k));
    pack_panels(a, m, k, rs, cs, width, scratch.panels.data());
    const float* packed = scratch.panels.data();
    for_each_tile(n, k, tile_rows, pool, [&](std::int64_t t, std::int64_t q0, std::int64_t depth) {
        thread_local std::vector<float> copy;
        const std::int64_t j = t * tile_rows, cols = std::min(tile_rows, n - j);
        const float* rows_of_b = nullptr;
        std::int64_t stride = kCopyStride;
        if constexpr (D == DType::F32)
            if (cols == tile_rows && ldb % kAliasingStride != 0) rows_of_b = b + j * ldb + q0, stride = ldb;
        if (!rows_of_b) {
            copy.resize(static_cast<std::size_t>(tile_rows * kCopyStride));
            for (std::int64_t i = 0; i < tile_rows; ++i) {
                float* row = copy.data() + i * kCopyStride;
                const StoredAs<D>* stored = b + (j + i) * ldb + q0;
                if (i >= cols) std::fill(row, row + depth, 0.0f);
                else if constexpr (D == DType::F32) std::memcpy(row, stored, static_cast<std::size_t>(depth) * sizeof(float));
                else widen<D>(stored, depth, row);
            }
            rows_of_b = copy.data();
        }
        const auto next = next_tile<tile_rows>(b, ldb, j, n, q0, depth);
        for (std::int64_t p = 0; p < panels; ++p)
            f32_tile<I>(packed + (p * k + q0) * width, rows_of_b, stride, depth, out + p * width * ldc + j, ldc,
                        std::min(width, m - p * width), cols, q0 > 0, p == 0 ? next : NextTile<tile_rows>{});
    });
}

// panels[t][q / 2][r][q % 2] = the bf16 bits of a[t * width + r, q] (A's
// values are bf16 numbers, so dropping the low half is exact), zero past the
// last row; k even. Pair q / 2 of a panel starts at q * width, as q does in
// pack_panels' layout.
inline void pack_pair_panels(const float* a, std::int64_t m, std::int64_t k, std::int64_t rs, std::int64_t cs,
                             std::int64_t width, std::uint16_t* panels) {
    for (std::int64_t t = 0; t * width < m; ++t) {
        std::uint16_t* panel = panels + t * width * k;
        const std::int64_t rows = std::min(width, m - t * width);
        for (std::int64_t r = 0; r < width; ++r) {
            const float* row = a + (t * width + r) * rs;
            for (std::int64_t q = 0; q < k; ++q)
                panel[(q & ~std::int64_t{1}) * width + 2 * r + (q & 1)] =
                    r < rows ? static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(row[q * cs]) >> 16) : 0;
        }
    }
}

// bf16 A (as f32 values) times bf16 B on AVX512_BF16: twice the products per
// instruction of the f32 kernel. Each tile's rows are copied per block of q
// (a model's row strides are multiples of 2 KiB, too few L1 ways otherwise).
inline void bf16_dot_gemm(const float* a, std::int64_t m, std::int64_t k, std::int64_t rs, std::int64_t cs,
                          const std::uint16_t* b, std::int64_t n, std::int64_t ldb, float* out, std::int64_t ldc,
                          GemmScratch& scratch, ThreadPool* pool) {
    constexpr std::int64_t width = 16, tile_rows = 16;
    const std::int64_t panels = (m + width - 1) / width;
    scratch.pair_panels.resize(static_cast<std::size_t>(panels * width * k));
    pack_pair_panels(a, m, k, rs, cs, width, scratch.pair_panels.data());
    const std::uint16_t* packed = scratch.pair_panels.data();
    for_each_tile(n, k, tile_rows, pool, [&](std::int64_t t, std::int64_t q0, std::int64_t depth) {
        thread_local std::vector<std::uint16_t> copy;
        copy.resize(static_cast<std::size_t>(tile_rows * kCopyStride));
        const std::int64_t j = t * tile_rows, cols = std::min(tile_rows, n - j);
        for (std::int64_t i = 0; i < tile_rows; ++i) {
            std::uint16_t* row = copy.data() + i * kCopyStride;
            if (i < cols) std::memcpy(row, b + (j + i) * ldb + q0, static_cast<std::size_t>(depth) * sizeof(std::uint16_t));
            else std::fill(row, row + depth, std::uint16_t{0});
        }
        const auto next = next_tile<tile_rows>(b, ldb, j, n, q0, depth);
        for (std::int64_t p = 0; p < panels; ++p)
            tile_bf16_dot(packed + (p * k + q0) * width, copy.data(), kCopyStride, depth, out + p * width * ldc + j, ldc,
                          std::min(width, m - p * width), cols, q0 > 0, p == 0 ? next : NextTile<tile_rows>{});
    });
}

inline void rowwise_gemm(quant::Isa isa, const float* a, std::int64_t m, std::int64_t k, std::int64_t rs,
                         std::int64_t cs, const float* b, std::int64_t n, std::int64_t ldb, float* out,
                         std::int64_t ldc, GemmScratch& scratch, ThreadPool* pool) {
    if (isa == quant::Isa::Avx512Vnni)
        rowwise_gemm_on<quant::Isa::Avx512Vnni, DType::F32>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
    else
        rowwise_gemm_on<quant::Isa::Avx2, DType::F32>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
}

// rowwise_gemm for a B of 16-bit floats (`b_dtype`: bf16 or f16) read as
// stored. Where A's values are bf16 numbers too (`a_is_bf16`: A was a bf16
// tensor), B is bf16, k is even and the CPU has AVX512_BF16, the products run
// on vdpbf16ps; otherwise B's tiles are widened to f32.
inline void narrow_rowwise_gemm(quant::Isa isa, DType b_dtype, bool a_is_bf16, const float* a, std::int64_t m, std::int64_t k,
                                std::int64_t rs, std::int64_t cs, const std::uint16_t* b, std::int64_t n, std::int64_t ldb,
                                float* out, std::int64_t ldc, GemmScratch& scratch, ThreadPool* pool) {
    if (a_is_bf16 && b_dtype == DType::BF16 && k % 2 == 0 && quant::supports_bf16_dot(isa))
        return bf16_dot_gemm(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
    auto run = [&]<quant::Isa I>() {
        if (b_dtype == DType::BF16) rowwise_gemm_on<I, DType::BF16>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
        else rowwise_gemm_on<I, DType::F16>(a, m, k, rs, cs, b, n, ldb, out, ldc, scratch, pool);
    };
    if (isa == quant::Isa::Avx512Vnni) run.template operator()<quant::Isa::Avx512Vnni>();
    else run.template operator()<quant::Isa::Avx2>();
}

#endif

}  // namespace luminal::cpu::gemm_detail

#pragma once
// MatmulOp on the CPU: out[.., i, j] = sum_k a[.., i, k] * b[.., j, k].
// f32 operands are handed to Eigen's GEMM in place whenever each 2-D slice is
// row- or column-major with a unit inner stride (a transposed operand is just
// the other layout); other strides are packed into a contiguous temporary.
// Batch axes are looped (a stride of 0 broadcasts a batch). f16 / bf16
// operands, and padded views, are converted to contiguous f32 first and the
// result rounded to the node dtype, except that a B with contiguous rows
// (attention's keys, a weight) or contiguous columns (attention's values),
// 16-bit or f32 in several batches (or one f32 batch times one row of A where
// Eigen is not vectorised), times at most few_rows::kMaxRows rows of A is read
// in place (and widened on the fly) by few_rows.hpp's products, and a 16-bit B
// with contiguous rows times more rows by gemm.hpp's (on bf16 pairs where A
// was bf16 too);
// integers use a wrapping triple loop.
// GCC 12 warns, falsely, that the AVX-512 intrinsics Eigen uses under
// -march=native may read uninitialised values (GCC bug 105593); the intrinsics
// header is included here first so that the warning is off where it points.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <algorithm>
#include <cstdint>
#include <vector>

#include "luminal/cpu/few_rows.hpp"
#include "luminal/cpu/gemm.hpp"
#include "luminal/cpu/reduce.hpp"
#include "luminal/cpu/thread_pool.hpp"
#include "luminal/cpu/view.hpp"

namespace luminal::cpu {

struct MatmulScratch {
    std::vector<float> a, b, out, pack_a, pack_b;
    std::vector<std::int64_t> ia, ib, iout;
    gemm_detail::GemmScratch gemm;
    std::vector<few_rows::Batch> batches;
    few_rows::Scratch few;
    ThreadPool* pool = nullptr;           // f32 GEMMs split their output columns over it
    quant::Isa isa = quant::Isa::Scalar;  // Scalar: Eigen's GEMM only
};

namespace matmul_detail {

// One 2-D operand slice: rows x cols with row stride rs and column stride cs.
struct Slice {
    const float* data;
    std::int64_t rows, cols, rs, cs;
};

using RowMap = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                          Eigen::OuterStride<>>;
using ColMap = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>, 0,
                          Eigen::OuterStride<>>;
using OutMap = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                          Eigen::OuterStride<>>;

// Multiply-adds below which a GEMM runs on the calling thread alone.
inline constexpr std::int64_t kParallelGemmWork = 1 << 18;
// Output columns per thread at least.
inline constexpr std::int64_t kGemmColumnGrain = 32;

// Calls f with an Eigen map of the slice, packing it when no map fits.
template <typename F>
void with_map(Slice s, std::vector<float>& pack, F&& f) {
    if (s.cols == 1) s.cs = 1;  // the stride of a size-1 axis is never used
    if (s.rows == 1) s.rs = s.cols * s.cs;
    if (s.cs == 1 && s.rs >= s.cols) return f(RowMap(s.data, s.rows, s.cols, Eigen::OuterStride<>(s.rs)));
    if (s.rs == 1 && s.cs >= s.rows) return f(ColMap(s.data, s.rows, s.cols, Eigen::OuterStride<>(s.cs)));
    pack.resize(static_cast<std::size_t>(s.rows * s.cols));
    for (std::int64_t i = 0; i < s.rows; ++i)
        for (std::int64_t j = 0; j < s.cols; ++j) pack[i * s.cols + j] = s.data[i * s.rs + j * s.cs];
    f(RowMap(pack.data(), s.rows, s.cols, Eigen::OuterStride<>(s.cols)));
}

// out [a.rows, b.rows] = a b^T; a large product splits b's rows (the output's
// columns) over the pool. A B with contiguous rows is read in place by
// rowwise_gemm where the CPU has its instructions; otherwise each part is one
// Eigen GEMM.
inline void gemm(const Slice& a, const Slice& b, float* out, MatmulScratch& scratch) {
    if (a.cols == 0) {
        OutMap(out, a.rows, b.rows, Eigen::OuterStride<>(b.rows)).setZero();
        return;
    }
    const bool parallel = scratch.pool && scratch.pool->size() > 1 && a.rows * b.rows * a.cols >= kParallelGemmWork;
#ifdef LUMINAL_QUANT_X86
    if (gemm_detail::applies(scratch.isa, a.rows, a.cols, b.cols == 1 ? 1 : b.cs))
        return gemm_detail::rowwise_gemm(scratch.isa, a.data, a.rows, a.cols, a.rs, a.cs, b.data, b.rows, b.rs, out,
                                         b.rows, scratch.gemm, parallel ? scratch.pool : nullptr);
#endif
    auto columns = [&](std::int64_t j0, std::int64_t j1, std::vector<float>& pack_a, std::vector<float>& pack_b) {
        OutMap c(out + j0, a.rows, j1 - j0, Eigen::OuterStride<>(b.rows));
        const Slice part{b.data + j0 * b.rs, j1 - j0, b.cols, b.rs, b.cs};
        with_map(a, pack_a, [&](const auto& am) {
            with_map(part, pack_b, [&](const auto& bm) { c.noalias() = am * bm.transpose(); });
        });
    };
    if (!parallel) return columns(0, b.rows, scratch.pack_a, scratch.pack_b);
    scratch.pool->parallel_for(b.rows, kGemmColumnGrain, [&](std::int64_t j0, std::int64_t j1) {
        thread_local std::vector<float> pack_a, pack_b;
        columns(j0, j1, pack_a, pack_b);
    });
}

// Numeric axes of an operand; a padded view is copied out contiguously into
// `storage` (lanes of type L) first.
template <typename L>
BoundAxes operand_axes(const ShapeTracker& view, const DynMap& dims, DType dtype, const std::byte* src, bool force_copy,
                       std::vector<L>& storage, const std::byte*& data) {
    BoundAxes bound(view, dims);
    if (!bound.padded && !force_copy) {
        data = src;
        return bound;
    }
    StridedView whole(view, dims);
    storage.resize(static_cast<std::size_t>(whole.numel()));
    load_view(dtype, src, whole, 0, whole.numel(), storage.data());
    data = reinterpret_cast<const std::byte*>(storage.data());
    bound.axes = reduce_detail::contiguous_axes(bound.axes);
    bound.base = 0;
    bound.padded = false;
    return bound;
}

template <DType D>
inline float widen(std::uint16_t bits) {
    if constexpr (D == DType::BF16) return bf16_bits_to_f32(bits);
    else return f16_bits_to_f32(bits);
}

// dst[0..n) = src[0..n) widened to f32.
template <DType D>
inline void widen_row(const std::uint16_t* src, std::int64_t n, float* dst) {
    std::int64_t j = 0;
#ifdef __F16C__
    if constexpr (D == DType::F16)
        for (; j + 8 <= n; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j))));
#endif
    for (; j < n; ++j) dst[j] = widen<D>(src[j]);
}

// Whether gemm.hpp's products run for m rows of depth k, B's rows contiguous.
inline bool rowwise_gemm_applies([[maybe_unused]] quant::Isa isa, [[maybe_unused]] std::int64_t m,
                                 [[maybe_unused]] std::int64_t k) {
#ifdef LUMINAL_QUANT_X86
    return gemm_detail::applies(isa, m, k, 1);
#else
    return false;
#endif
}

// Eigen's GEMV is vectorised only as far as the compile flags allow. Built
// without AVX2 (the tests, the Python extension: portable code), one row of A
// times an f32 B runs few_rows.hpp's products, compiled for their own targets
// and chosen at run time: the SSE2 GEMV took about half of a decode step of
// the Python benchmark's ~100M f32 Llama (perf).
#ifdef __AVX2__
inline constexpr bool kEigenGemvVectorised = true;
#else
inline constexpr bool kEigenGemvVectorised = false;
#endif

}  // namespace matmul_detail

inline void matmul(DType a_dtype, const std::byte* a_src, const ShapeTracker& a_view, DType b_dtype,
                   const std::byte* b_src, const ShapeTracker& b_view, const DynMap& dims, DType out_dtype,
                   std::byte* out, std::int64_t out_numel, std::uint32_t node, MatmulScratch& scratch) {
    using namespace matmul_detail;
    const std::size_t rank = a_view.rank();
    check(rank >= 2 && b_view.rank() == rank, "Matmul", "node {}: operands need equal ranks >= 2, got {} and {}", node,
          rank, b_view.rank());
    const bool floats = is_float(a_dtype);
    const std::byte *a_data = nullptr, *b_data = nullptr;
    BoundAxes A = floats ? operand_axes(a_view, dims, a_dtype, a_src, a_dtype != DType::F32, scratch.a, a_data)
                         : operand_axes(a_view, dims, a_dtype, a_src, true, scratch.ia, a_data);
    // A few rows of A times a B with contiguous rows or columns, 16-bit (the
    // decode step's 16-bit weights and KV cache) or f32 in several batches (an
    // f32 cache's heads): few_rows.hpp's products read B as stored, widening
    // as they go, split over the pool.
    const BoundAxes b_bound(b_view, dims);
    std::int64_t batch_count = 1;
    for (std::size_t i = 0; i + 2 < rank; ++i) batch_count *= A.axes[i].size;
    const bool narrow_b = b_dtype == DType::BF16 || b_dtype == DType::F16;
    const bool f32_row = b_dtype == DType::F32 && A.axes[rank - 2].size == 1 && !kEigenGemvVectorised &&
                         scratch.isa != quant::Isa::Scalar;
    const bool few = floats && (narrow_b || (b_dtype == DType::F32 && batch_count > 1) || f32_row) &&
                     !b_bound.padded && A.axes[rank - 2].size <= few_rows::kMaxRows;
    const bool b_rows = few && b_bound.axes[rank - 1].stride == 1;
    const bool b_columns = few && !b_rows && b_bound.axes[rank - 2].stride == 1;
    const bool few_rows_product = b_rows || b_columns;
    // More rows times a 16-bit B with contiguous rows (a prompt's weights):
    // gemm.hpp's product reads B as stored, a tile at a time. Any other
    // 16-bit B is copied to f32 first.
    const bool narrow_in_place = floats && narrow_b && !few_rows_product && !b_bound.padded &&
                                 b_bound.axes[rank - 1].stride == 1 &&
                                 rowwise_gemm_applies(scratch.isa, A.axes[rank - 2].size, A.axes[rank - 1].size);
    BoundAxes B = few_rows_product || narrow_in_place ? b_bound
                  : floats ? operand_axes(b_view, dims, b_dtype, b_src, b_dtype != DType::F32, scratch.b, b_data)
                           : operand_axes(b_view, dims, b_dtype, b_src, true, scratch.ib, b_data);
    if (few_rows_product || narrow_in_place) b_data = b_src;
    const StridedAxis &am = A.axes[rank - 2], &ak = A.axes[rank - 1], &bn = B.axes[rank - 2], &bk = B.axes[rank - 1];
    const std::int64_t m = am.size, k = ak.size, n = bn.size;
    check(bk.size == k, "Matmul", "node {}: inner sizes differ ({} and {})", node, k, bk.size);
    std::int64_t batches = 1;
    for (std::size_t i = 0; i + 2 < rank; ++i) {
        check(A.axes[i].size == B.axes[i].size, "Matmul", "node {}: batch axis {} differs ({} and {})", node, i,
              A.axes[i].size, B.axes[i].size);
        batches *= A.axes[i].size;
    }
    check(batches * m * n == out_numel, "Matmul", "node {}: the product has {} elements but the node has {}", node,
          batches * m * n, out_numel);

    float* fout = nullptr;
    if (floats) {
        if (out_dtype == DType::F32) {
            fout = reinterpret_cast<float*>(out);
        } else {
            scratch.out.resize(static_cast<std::size_t>(batches * m * n));
            fout = scratch.out.data();
        }
    } else {
        scratch.iout.resize(static_cast<std::size_t>(batches * m * n));
    }

    std::vector<std::int64_t> c(rank - 2, 0);
    if (few_rows_product) {
        auto* af = reinterpret_cast<const float*>(a_data);
        // rows_product reads A's rows contiguously.
        const bool pack = b_rows && ak.stride != 1 && k > 1;
        if (pack) scratch.pack_a.resize(static_cast<std::size_t>(batches * m * k));
        scratch.batches.resize(static_cast<std::size_t>(batches));
        for (std::int64_t bi = 0; bi < batches; ++bi) {
            std::int64_t pa = A.base, pb = B.base;
            for (std::size_t i = 0; i + 2 < rank; ++i) pa += c[i] * A.axes[i].stride, pb += c[i] * B.axes[i].stride;
            const float* rows = af + pa;
            if (pack) {
                float* packed = scratch.pack_a.data() + bi * m * k;
                for (std::int64_t i = 0; i < m; ++i)
                    for (std::int64_t q = 0; q < k; ++q) packed[i * k + q] = af[pa + i * am.stride + q * ak.stride];
                rows = packed;
            }
            scratch.batches[bi] = {rows, b_data + pb * static_cast<std::int64_t>(size_of(b_dtype)), fout + bi * m * n};
            for (std::size_t i = rank - 2; i-- > 0;) {
                if (++c[i] < A.axes[i].size) break;
                c[i] = 0;
            }
        }
        const std::int64_t lda = pack ? k : am.stride, a_cs = pack ? 1 : ak.stride;
        const std::int64_t ldb = b_rows ? bn.stride : bk.stride;
        auto run = [&]<DType D>() {
            if (b_rows)
                few_rows::rows_product<D>(scratch.isa, scratch.batches.data(), batches, m, k, lda, n, ldb, n, scratch.pool);
            else
                few_rows::columns_product<D>(scratch.isa, scratch.batches.data(), batches, m, k, lda, a_cs, n, ldb, n,
                                             scratch.few, scratch.pool);
        };
        if (b_dtype == DType::BF16) run.template operator()<DType::BF16>();
        else if (b_dtype == DType::F16) run.template operator()<DType::F16>();
        else run.template operator()<DType::F32>();
        if (out_dtype != DType::F32) store_lanes(out_dtype, scratch.out.data(), batches * m * n, out, 0);
        return;
    }
    for (std::int64_t bi = 0; bi < batches; ++bi) {
        std::int64_t pa = A.base, pb = B.base;
        for (std::size_t i = 0; i + 2 < rank; ++i) pa += c[i] * A.axes[i].stride, pb += c[i] * B.axes[i].stride;
        if (narrow_in_place) {
#ifdef LUMINAL_QUANT_X86
            const bool parallel = scratch.pool && scratch.pool->size() > 1 && m * n * k >= kParallelGemmWork;
            gemm_detail::narrow_rowwise_gemm(scratch.isa, b_dtype, a_dtype == DType::BF16, reinterpret_cast<const float*>(a_data) + pa,
                                             m, k, am.stride, ak.stride, reinterpret_cast<const std::uint16_t*>(b_data) + pb, n,
                                             bn.stride, fout + bi * m * n, n, scratch.gemm, parallel ? scratch.pool : nullptr);
#endif
        } else if (floats) {
            auto* af = reinterpret_cast<const float*>(a_data);
            auto* bf = reinterpret_cast<const float*>(b_data);
            gemm(Slice{af + pa, m, k, am.stride, ak.stride}, Slice{bf + pb, n, k, bn.stride, bk.stride},
                 fout + bi * m * n, scratch);
        } else {
            auto* ai = reinterpret_cast<const std::int64_t*>(a_data);
            auto* bi64 = reinterpret_cast<const std::int64_t*>(b_data);
            std::int64_t* o = scratch.iout.data() + bi * m * n;
            for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t j = 0; j < n; ++j) {
                    std::uint64_t acc = 0;
                    const std::int64_t* ar = ai + pa + i * am.stride;
                    const std::int64_t* br = bi64 + pb + j * bn.stride;
                    for (std::int64_t q = 0; q < k; ++q)
                        acc += static_cast<std::uint64_t>(ar[q * ak.stride]) * static_cast<std::uint64_t>(br[q * bk.stride]);
                    o[i * n + j] = static_cast<std::int64_t>(acc);
                }
        }
        for (std::size_t i = rank - 2; i-- > 0;) {
            if (++c[i] < A.axes[i].size) break;
            c[i] = 0;
        }
    }
    if (floats && out_dtype != DType::F32) store_lanes(out_dtype, scratch.out.data(), batches * m * n, out, 0);
    if (!floats) store_lanes(out_dtype, scratch.iout.data(), batches * m * n, out, 0);
}

}  // namespace luminal::cpu

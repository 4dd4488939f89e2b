#pragma once
// BackendOp::Matmul on the CPU: out[.., i, j] = sum_k a[.., i, k] * b[.., j, k].
// f32 operands are handed to Eigen's GEMM in place whenever each 2-D slice is
// row- or column-major with a unit inner stride (a transposed operand is just
// the other layout); other strides are packed into a contiguous temporary.
// Batch axes are looped (a stride of 0 broadcasts a batch). f16 / bf16
// operands, and padded views, are converted to contiguous f32 first and the
// result rounded to the node dtype; integers use a wrapping triple loop.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "luminal/runtime/cpu_reduce.hpp"
#include "luminal/runtime/cpu_view.hpp"

namespace luminal::cpu {

struct MatmulScratch {
    std::vector<float> a, b, out, pack_a, pack_b;
    std::vector<std::int64_t> ia, ib, iout;
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
using OutMap = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

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

inline void gemm(const Slice& a, const Slice& b, float* out, MatmulScratch& scratch) {
    OutMap c(out, a.rows, b.rows);
    if (a.cols == 0) {
        c.setZero();
        return;
    }
    with_map(a, scratch.pack_a, [&](const auto& am) {
        with_map(b, scratch.pack_b, [&](const auto& bm) { c.noalias() = am * bm.transpose(); });
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
    BoundAxes B = floats ? operand_axes(b_view, dims, b_dtype, b_src, b_dtype != DType::F32, scratch.b, b_data)
                         : operand_axes(b_view, dims, b_dtype, b_src, true, scratch.ib, b_data);
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
    for (std::int64_t bi = 0; bi < batches; ++bi) {
        std::int64_t pa = A.base, pb = B.base;
        for (std::size_t i = 0; i + 2 < rank; ++i) pa += c[i] * A.axes[i].stride, pb += c[i] * B.axes[i].stride;
        if (floats) {
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

#pragma once
// cuda.BlasMatmul: a Matmul the CUDA runtime runs through cuBLASLt, a host op
// (it launches library kernels, no generated source). Same semantics as
// Matmul; it exists where each operand is a (batched) strided matrix cuBLASLt
// can describe and both operands have one float dtype, which the CUDA rules
// check with blas_layout(). With an addend (a third input, f32, laid out as the
// output) it is Matmul then Add: the library's epilogue adds it (beta = 1), so
// a residual add is not a launch of its own.
#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>

#include "luminal/lowering/matmul.hpp"

namespace luminal::cuda {

// One operand as cuBLASLt sees it, evaluated for one execution: `rows` x k
// with row stride `ld` when row_major (k contiguous), else column stride `ld`
// (rows contiguous); `batch` matrices `batch_stride` elements apart from `base`.
struct BlasOperand {
    std::int64_t rows = 0, k = 0, ld = 0, batch = 1, batch_stride = 0, base = 0;
    bool row_major = true;
    friend bool operator==(const BlasOperand&, const BlasOperand&) = default;
};

namespace blas_detail {

// Axes [0, r-2) merge into one batch axis of uniform stride (size-1 axes and broadcasts aside).
inline bool batch_axes_merge(const ShapeTracker& v) {
    std::optional<Expression> inner_stride, inner_size;
    const auto& axes = v.axes();
    for (std::size_t i = v.rank() - 2; i-- > 0;) {
        if (axes[i].size == Expression(1)) continue;
        if (inner_stride && !(axes[i].stride == *inner_stride * *inner_size)) return false;
        inner_stride = axes[i].stride;
        inner_size = axes[i].size;
    }
    return true;
}

}  // namespace blas_detail

// Whether a Matmul operand view (.., rows, k) is a matrix cuBLASLt can read.
inline bool blas_layout(const ShapeTracker& v) {
    if (v.rank() < 2 || v.is_padded_or_masked()) return false;
    const auto& axes = v.axes();
    const std::size_t r = v.rank();
    const bool row_major = axes[r - 1].stride == Expression(1);
    const bool col_major = axes[r - 2].stride == Expression(1);
    return (row_major || col_major) && blas_detail::batch_axes_merge(v);
}

inline BlasOperand blas_operand(const ShapeTracker& v, const DynMap& dims) {
    const auto& axes = v.axes();
    const std::size_t r = v.rank();
    BlasOperand op;
    op.rows = axes[r - 2].size.eval(dims);
    op.k = axes[r - 1].size.eval(dims);
    op.row_major = axes[r - 1].stride.eval(dims) == 1;
    op.ld = std::max<std::int64_t>(op.row_major ? axes[r - 2].stride.eval(dims) : axes[r - 1].stride.eval(dims), 1);
    op.base = v.base().eval(dims);
    for (std::size_t i = 0; i + 2 < r; ++i) {
        op.base += axes[i].offset.eval(dims) * axes[i].stride.eval(dims);
        const std::int64_t size = axes[i].size.eval(dims);
        op.batch *= size;
        if (size != 1) op.batch_stride = axes[i].stride.eval(dims);
    }
    op.base += axes[r - 2].offset.eval(dims) * axes[r - 2].stride.eval(dims) + axes[r - 1].offset.eval(dims) * axes[r - 1].stride.eval(dims);
    // A single row (or column) has no meaningful stride; cuBLASLt wants ld >= the contiguous extent.
    if (op.row_major && op.rows == 1) op.ld = std::max(op.ld, op.k);
    if (!op.row_major && op.k == 1) op.ld = std::max(op.ld, op.rows);
    return op;
}

// Whether cuBLASLt accepts the operand as evaluated: leading dimension at
// least the contiguous extent, batches within 32-bit counts.
inline bool blas_accepts(const BlasOperand& op) {
    const std::int64_t contiguous = op.row_major ? op.k : op.rows;
    return op.ld >= contiguous && op.batch <= std::numeric_limits<std::int32_t>::max() && op.batch_stride >= 0;
}

// Whether cuBLASLt accepts the operand at every size: a matrix of constant
// strides, its leading dimension at least its contiguous extent, one batch. An
// op with an addend needs it, having no generated kernel to fall back on.
inline bool blas_accepts_always(const ShapeTracker& v) {
    if (!blas_layout(v)) return false;
    const auto& axes = v.axes();
    const std::size_t r = v.rank();
    for (std::size_t i = 0; i + 2 < r; ++i)
        if (!(axes[i].size == Expression(1))) return false;
    const bool row_major = axes[r - 1].stride == Expression(1);
    const auto ld = axes[row_major ? r - 2 : r - 1].stride.as_constant();
    const auto contiguous = axes[row_major ? r - 1 : r - 2].size.as_constant();
    return ld && contiguous && *ld >= *contiguous;
}

struct BlasMatmulOp {
    static constexpr std::string_view name = "cuda.BlasMatmul";
    bool adds_addend = false;  // out = a . b^T + c, c the third input
    bool operator==(const BlasMatmulOp&) const = default;
    std::size_t hash() const { return adds_addend ? 0xB1A5ADD : 0xB1A5; }
    std::string attributes() const { return adds_addend ? "plus addend" : ""; }
    Shape shape(std::span<const ShapeTracker> inputs) const { return MatmulOp{}.shape(inputs.first(2)); }
    double flops(const OpCostQuery& q) const { return MatmulOp{}.flops(q) + (adds_addend ? q.elements(q.shape) : 0.0); }
    // The product rounded to f32, then the addend added and rounded again, as Matmul then Add.
    void reference(const ReferenceCall& call) const {
        MatmulOp{}.reference(ReferenceCall{call.inputs.first(2), call.out, call.dims, call.node});
        if (!adds_addend) return;
        for (std::size_t i = 0; i < call.out.size(); ++i)
            call.out.store_double(i, call.out.as_double(i) + call.inputs[2].f(static_cast<std::int64_t>(i)));
    }
};

}  // namespace luminal::cuda

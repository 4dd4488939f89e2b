#pragma once
// ExpertMatmul (lowering/expert_matmul.hpp) on the CPU. The rows are sorted by
// expert (a counting sort), so each expert's rows are one contiguous panel of
// activations; then every (expert, chunk of output rows) is one task of the
// pool, reading that chunk of the expert's weights once, in place, for all its
// rows: a GEMV at decode, a GEMM in a prefill. 16-bit weights are widened as
// they are read for a few rows (cpu/few_rows.hpp) and
// widened once per chunk into a panel for many. Block-quantized experts are
// read as QuantizedMatmul reads a matrix (cpu/quantized.hpp): each expert's
// rows rounded to Q8 once, or decoded per chunk for f32 activations.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "luminal/cpu/matmul.hpp"
#include "luminal/cpu/quantized.hpp"
#include "luminal/cpu/thread_pool.hpp"
#include "luminal/cpu/view.hpp"
#include "luminal/lowering/expert_matmul.hpp"

namespace luminal::cpu {

struct ExpertScratch {
    std::vector<std::int64_t> experts, order, starts;
    std::vector<float> x, sorted_x, sorted_out;
    std::vector<quant::Q8Rows> expert_rows;  // per expert: its rows rounded to Q8 (quantized experts)
};

namespace expert_detail {

// Output rows of one expert per task: 64 rows of a 2048-wide bf16 matrix is 256 KiB.
inline constexpr std::int64_t kChunkRows = 64;

template <DType D>
void chunk_product(quant::Isa isa, const float* a, std::int64_t m, std::int64_t k, const std::uint16_t* w,
                   std::int64_t rows, std::int64_t row_stride, float* out, std::int64_t ldc) {
    if (m <= few_rows::kMaxRows) {
        const few_rows::Batch batch{a, w, out};
        return few_rows::rows_product<D>(isa, &batch, 1, m, k, k, rows, row_stride, ldc, nullptr);
    }
    thread_local std::vector<float> staged;
    staged.resize(static_cast<std::size_t>(rows * k));
    for (std::int64_t j = 0; j < rows; ++j) matmul_detail::widen_row<D>(w + j * row_stride, k, staged.data() + j * k);
    const matmul_detail::RowMap x(a, m, k, Eigen::OuterStride<>(k));
    const matmul_detail::RowMap panel(staged.data(), rows, k, Eigen::OuterStride<>(k));
    matmul_detail::OutMap(out, m, rows, Eigen::OuterStride<>(ldc)).noalias() = x * panel.transpose();
}

inline void f32_chunk_product(const float* a, std::int64_t m, std::int64_t k, const float* w, std::int64_t rows,
                              std::int64_t row_stride, float* out, std::int64_t ldc) {
    const matmul_detail::RowMap x(a, m, k, Eigen::OuterStride<>(k));
    const matmul_detail::RowMap panel(w, rows, k, Eigen::OuterStride<>(row_stride));
    matmul_detail::OutMap(out, m, rows, Eigen::OuterStride<>(ldc)).noalias() = x * panel.transpose();
}

// Rows [j0, j0 + rows) of one expert's blocks times its m activation rows.
template <QuantFormat F>
void quantized_chunk_product(quant::Isa isa, const QuantizedMatmulOp& q, const std::byte* blocks, const float* a,
                             const quant::Q8Rows* q8, std::int64_t m, std::int64_t j0, std::int64_t rows, float* out,
                             std::int64_t ldc) {
    const std::int64_t k = q.cols;
    // The task writes out[i * ldc + j] for absolute rows j: shift out so row j0 lands at column 0.
    const quant::ProductTask task{blocks, quantized_bytes(q.format, 1, k), k, j0, j0 + rows, out - j0, ldc};
    if (q8) return quant::q8_product<F>(isa, task, *q8);
    if (m <= quantized_detail::kDirectRows) return quant::f32_product<F>(isa, task, a, m, k);
    thread_local std::vector<float> panel;
    panel.resize(static_cast<std::size_t>(rows * k));
    quant::decode_rows<F>(isa, task, panel.data());
    f32_chunk_product(a, m, k, panel.data(), rows, k, out, ldc);
}

}  // namespace expert_detail

// out [R, N] (f32, element order) = for each row r: x[r] · W[experts[r]]^T.
inline void expert_matmul(const ExpertMatmulOp& op, DType x_dtype, const std::byte* x_src, const StridedView& x_view,
                          DType w_dtype, const std::byte* w_src, const ShapeTracker& w_view, DType e_dtype,
                          const std::byte* e_src, const StridedView& e_view, const DynMap& dims, float* out,
                          std::int64_t out_numel, std::uint32_t node, quant::Isa isa, ThreadPool& pool,
                          ExpertScratch& scratch) {
    using namespace expert_detail;
    constexpr std::string_view name = ExpertMatmulOp::name;
    BoundAxes w(w_view, dims);
    std::int64_t count = 0, n = 0, k = 0, expert_stride = 0, row_stride = 0;
    std::vector<float> copied;
    const std::byte* w_data = w_src;
    if (op.quant) {
        n = op.quant->rows, k = op.quant->cols;
        check(w_dtype == DType::U8, name.data(), "node {}: blocks must be u8, got {}", node, name_of(w_dtype));
        const std::int64_t matrix = quantized_bytes(op.quant->format, n, k);
        const StridedView blocks(w_view, dims);
        check(matrix > 0 && blocks.numel() % matrix == 0 && blocks.kind() == StridedView::Kind::Contiguous, name.data(),
              "node {}: {} bytes of blocks are not whole {} matrices read in order", node, blocks.numel(),
              ::luminal::quantized_detail::describe(op.quant->format, n, k));
        count = blocks.numel() / matrix, expert_stride = matrix;
        w_data = w_src + blocks.base();
    } else {
        check(w.axes.size() == 3, name.data(), "node {}: the weights must be [experts, out, in], got rank {}", node,
              w.axes.size());
        count = w.axes[0].size, n = w.axes[1].size, k = w.axes[2].size;
        check(w_dtype == DType::F32 || w_dtype == DType::BF16 || w_dtype == DType::F16, name.data(),
              "node {}: weights must be f32, f16 or bf16, got {}", node, name_of(w_dtype));
        // A padded or strided-inner view of the weights is copied to f32 first (no model writes one).
        if (w.padded || w.axes[2].stride != 1) {
            const StridedView whole(w_view, dims);
            copied.resize(static_cast<std::size_t>(whole.numel()));
            load_view(w_dtype, w_src, whole, 0, whole.numel(), copied.data());
            w = BoundAxes(ShapeTracker(Shape{Expression(count), Expression(n), Expression(k)}), dims);
            w_data = reinterpret_cast<const std::byte*>(copied.data());
            w_dtype = DType::F32;
        }
        expert_stride = w.axes[0].stride, row_stride = w.axes[1].stride;
    }
    const std::int64_t rows = e_view.numel();
    check(x_view.numel() == rows * k, name.data(), "node {}: {} rows of {} inputs need {} activations, got {}", node,
          rows, k, rows * k, x_view.numel());
    check(out_numel == rows * n, name.data(), "node {}: {} rows of {} outputs, but the node has {} elements", node, rows,
          n, out_numel);

    scratch.experts.resize(static_cast<std::size_t>(rows));
    load_view(e_dtype, e_src, e_view, 0, rows, scratch.experts.data());
    scratch.starts.assign(static_cast<std::size_t>(count + 1), 0);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t e = scratch.experts[r];
        check(e >= 0 && e < count, name.data(), "node {}: row {} picks expert {}, outside [0, {})", node, r, e, count);
        ++scratch.starts[e + 1];
    }
    for (std::int64_t e = 0; e < count; ++e) scratch.starts[e + 1] += scratch.starts[e];
    scratch.order.resize(static_cast<std::size_t>(rows));
    {
        std::vector<std::int64_t> next(scratch.starts.begin(), scratch.starts.end() - 1);
        for (std::int64_t r = 0; r < rows; ++r) scratch.order[next[scratch.experts[r]]++] = r;
    }

    // The activations sorted by expert: each expert's rows one contiguous panel.
    scratch.x.resize(static_cast<std::size_t>(rows * k));
    load_view(x_dtype, x_src, x_view, 0, rows * k, scratch.x.data());
    scratch.sorted_x.resize(static_cast<std::size_t>(rows * k));
    for (std::int64_t j = 0; j < rows; ++j)
        std::copy_n(scratch.x.data() + scratch.order[j] * k, k, scratch.sorted_x.data() + j * k);
    scratch.sorted_out.resize(static_cast<std::size_t>(rows * n));

    struct Task {
        std::int64_t expert, first_row;
    };
    std::vector<Task> tasks;
    std::vector<std::int64_t> active;
    for (std::int64_t e = 0; e < count; ++e)
        if (scratch.starts[e + 1] > scratch.starts[e]) {
            active.push_back(e);
            for (std::int64_t j = 0; j < n; j += kChunkRows) tasks.push_back({e, j});
        }
    const bool q8 = op.quant && op.quant->activations == Activations::Q8;
    if (q8) {
        scratch.expert_rows.resize(static_cast<std::size_t>(count));
        pool.parallel_for(static_cast<std::int64_t>(active.size()), 1, [&](std::int64_t a0, std::int64_t a1) {
            for (std::int64_t a = a0; a < a1; ++a) {
                const std::int64_t e = active[a], first = scratch.starts[e], m = scratch.starts[e + 1] - first;
                quant::Q8Rows& q = scratch.expert_rows[e];
                quant::size_rows(m, k, q);
                quant::quantize_rows(isa, scratch.sorted_x.data() + first * k, k, k, 0, m, q);
            }
        });
    }
    pool.parallel_for(static_cast<std::int64_t>(tasks.size()), 1, [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t) {
            const auto [e, j0] = tasks[t];
            const std::int64_t first = scratch.starts[e], m = scratch.starts[e + 1] - first;
            const std::int64_t chunk = std::min(kChunkRows, n - j0);
            const float* a = scratch.sorted_x.data() + first * k;
            float* c = scratch.sorted_out.data() + first * n + j0;
            if (op.quant) {
                const std::byte* blocks = w_data + e * expert_stride;
                const quant::Q8Rows* rows_q8 = q8 ? &scratch.expert_rows[e] : nullptr;
                quant::with_format(op.quant->format, [&]<QuantFormat F>() {
                    quantized_chunk_product<F>(isa, *op.quant, blocks, a, rows_q8, m, j0, chunk, c, n);
                });
                continue;
            }
            const std::int64_t at = w.base + e * expert_stride + j0 * row_stride;
            if (w_dtype == DType::F32)
                f32_chunk_product(a, m, k, reinterpret_cast<const float*>(w_data) + at, chunk, row_stride, c, n);
            else if (w_dtype == DType::BF16)
                chunk_product<DType::BF16>(isa, a, m, k, reinterpret_cast<const std::uint16_t*>(w_data) + at, chunk,
                                           row_stride, c, n);
            else
                chunk_product<DType::F16>(isa, a, m, k, reinterpret_cast<const std::uint16_t*>(w_data) + at, chunk,
                                          row_stride, c, n);
        }
    });
    for (std::int64_t j = 0; j < rows; ++j)
        std::copy_n(scratch.sorted_out.data() + j * n, n, out + scratch.order[j] * n);
}

}  // namespace luminal::cpu

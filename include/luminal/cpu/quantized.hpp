#pragma once
// The quantized-weight ops of lowering/quantized.hpp on the CPU, split over
// the runtime's threads by weight rows (each output element is computed by
// one thread, the same way at any thread count):
//  * QuantizedMatmul with Q8 activations: each row of a rounded to Q8 blocks
//    once, then integer block products (quant_simd.hpp);
//  * with f32 activations: up to kDirectRows rows of a multiply the blocks
//    as they are decoded; more rows amortise decoding, so panels of weight
//    rows are decoded to f32 (in cache) and multiplied by the f32 GEMM;
//  * QuantizedGather decodes the blocks holding the gathered elements;
//  * Dequantize decodes everything (only when no product reads the blocks).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "luminal/lowering/quantized.hpp"
#include "luminal/cpu/matmul.hpp"
#include "luminal/cpu/quant_interleaved.hpp"
#include "luminal/cpu/quant_simd.hpp"
#include "luminal/cpu/thread_pool.hpp"
#include "luminal/cpu/view.hpp"

namespace luminal::cpu {

struct QuantScratch {
    quant::Q8Rows rows;
    std::vector<float> a;
    std::vector<std::int64_t> indexes;
};

namespace quantized_detail {

inline constexpr std::int64_t kDirectRows = 8;
inline constexpr std::int64_t kPanelRows = 64;
// Weight rows per thread at least: fewer cost more in waking than they save.
inline constexpr std::int64_t kRowGrain = 32;

// Input 0 of a node as contiguous f32 rows.
inline const float* contiguous_f32(DType dtype, const std::byte* src, const StridedView& v, std::vector<float>& copy) {
    if (dtype == DType::F32 && v.kind() == StridedView::Kind::Contiguous)
        return reinterpret_cast<const float*>(src) + v.base();
    copy.resize(static_cast<std::size_t>(v.numel()));
    load_view(dtype, src, v, 0, v.numel(), copy.data());
    return copy.data();
}

// The blocks of a [rows, cols] weight, checked to be all there and read in order.
inline const std::byte* contiguous_blocks(const StridedView& v, const std::byte* src, QuantFormat f, std::int64_t rows,
                                          std::int64_t cols, std::string_view op, std::uint32_t node) {
    ::luminal::quantized_detail::check_blocks(f, rows, cols, v.numel(), op, node);
    check(v.kind() == StridedView::Kind::Contiguous, op.data(), "node {}: the weight's blocks must be read in order",
          node);
    return src + v.base();
}

// out[i * ldc + j] = a[i] · panel[j] for a panel of decoded weight rows.
inline void panel_product(quant::Isa isa, const float* a, std::int64_t m, std::int64_t k, const float* panel,
                          std::int64_t rows, float* out, std::int64_t ldc, [[maybe_unused]] gemm_detail::GemmScratch& gemm) {
#ifdef LUMINAL_QUANT_X86
    if (gemm_detail::applies(isa, m, k, 1))
        return gemm_detail::rowwise_gemm(isa, a, m, k, k, 1, panel, rows, k, out, ldc, gemm, nullptr);
#endif
    const matmul_detail::RowMap x(a, m, k, Eigen::OuterStride<>(k));
    const matmul_detail::RowMap w(panel, rows, k, Eigen::OuterStride<>(k));
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>
        c(out, m, rows, Eigen::OuterStride<>(ldc));
    c.noalias() = x * w.transpose();
}

}  // namespace quantized_detail

// out [m, rows] = a [m, cols] · dequantize(blocks)^T.
inline void quantized_matmul(const QuantizedMatmulOp& op, DType a_dtype, const std::byte* a_src, const StridedView& a_view,
                             const std::byte* blocks_src, const StridedView& blocks_view, float* out,
                             std::int64_t out_numel, std::uint32_t node, quant::Isa isa, ThreadPool& pool,
                             QuantScratch& scratch) {
    using namespace quantized_detail;
    const std::int64_t k = op.cols, n = op.rows;
    const std::int64_t row_bytes = quantized_bytes(op.format, 1, k);
    const std::byte* blocks = contiguous_blocks(blocks_view, blocks_src, op.format, n, k, op.name, node);
    check(k > 0 && a_view.numel() % k == 0, op.name.data(), "node {}: {} activations are not rows of {}", node,
          a_view.numel(), k);
    const std::int64_t m = a_view.numel() / k;
    check(m * n == out_numel, op.name.data(), "node {}: the product has {} elements but the node has {}", node, m * n,
          out_numel);
    const float* a = contiguous_f32(a_dtype, a_src, a_view, scratch.a);
    quant::with_format(op.format, [&]<QuantFormat F>() {
        auto task = [&](std::int64_t j0, std::int64_t j1) {
            return quant::ProductTask{blocks, row_bytes, k, j0, j1, out, n};
        };
        if (op.activations == Activations::Q8) {
            quant::size_rows(m, k, scratch.rows);
            pool.parallel_for(m, 8, [&](std::int64_t i0, std::int64_t i1) { quant::quantize_rows(isa, a, k, k, i0, i1, scratch.rows); });
            if (op.layout == WeightLayout::Interleaved8) {
                if constexpr (F == QuantFormat::Q6_K) quant::sum_halves(scratch.rows);
                // Whole groups of 8 rows repacked, then the rows after them as blocks.
                constexpr std::int64_t g = quant::kInterleave;
                const std::int64_t groups = n / g, units = groups + (n % g ? 1 : 0);
                pool.parallel_for(units, kRowGrain / g, [&](std::int64_t u0, std::int64_t u1) {
                    const std::int64_t whole = std::min(u1, groups);
                    if (u0 < whole) quant::interleaved_q8_product<F>(isa, task(u0 * g, whole * g), scratch.rows);
                    if (u1 > groups) quant::q8_product<F>(isa, task(groups * g, n), scratch.rows);
                });
            } else {
                pool.parallel_for(n, kRowGrain, [&](std::int64_t j0, std::int64_t j1) {
                    quant::q8_product<F>(isa, task(j0, j1), scratch.rows);
                });
            }
        } else if (m <= kDirectRows) {
            pool.parallel_for(n, kRowGrain, [&](std::int64_t j0, std::int64_t j1) {
                quant::f32_product<F>(isa, task(j0, j1), a, m, k);
            });
        } else {
            pool.parallel_for(n, kPanelRows, [&](std::int64_t j0, std::int64_t j1) {
                thread_local std::vector<float> panel;
                thread_local gemm_detail::GemmScratch gemm;
                panel.resize(static_cast<std::size_t>(kPanelRows * k));
                for (std::int64_t p = j0; p < j1; p += kPanelRows) {
                    const std::int64_t rows = std::min(kPanelRows, j1 - p);
                    quant::decode_rows<F>(isa, task(p, p + rows), panel.data());
                    panel_product(isa, a, m, k, panel.data(), rows, out + p, n, gemm);
                }
            });
        }
    });
}

// out[i] = dequantize(blocks)[indexes[i]] for the n elements of the index view.
// `interleaved`: the blocks are repacked with 8 rows interleaved (quant_interleaved.hpp).
inline void quantized_gather(const QuantizedGatherOp& op, const std::byte* blocks_src, const StridedView& blocks_view,
                             bool interleaved, DType index_dtype, const std::byte* index_src,
                             const StridedView& index_view, float* out, std::int64_t n, std::uint32_t node,
                             QuantScratch& scratch) {
    using namespace quantized_detail;
    const std::int64_t total = op.rows * op.cols;
    const std::byte* blocks = contiguous_blocks(blocks_view, blocks_src, op.format, op.rows, op.cols, op.name, node);
    check(index_view.numel() == n, op.name.data(), "node {}: {} indexes for {} outputs", node, index_view.numel(), n);
    scratch.indexes.resize(static_cast<std::size_t>(n));
    load_view(index_dtype, index_src, index_view, 0, n, scratch.indexes.data());
    quant::with_format(op.format, [&]<QuantFormat F>() {
        constexpr std::int64_t block = quant::block_elements<F>;
        float decoded[quant::kMaxBlockElements];
        // Block `index` (row-major) as the file stores it.
        std::byte unpacked[quant::kInterleave * quant::block_bytes<F>];
        auto block_at = [&](std::int64_t index) -> const std::byte* {
            const std::int64_t per_row = op.cols / block, row = index / per_row, column = index % per_row;
            if (interleaved && row < op.rows / quant::kInterleave * quant::kInterleave) {
                const std::int64_t tile = (row / quant::kInterleave) * per_row + column;
                quant::unpack_tile<F>(blocks + tile * quant::kInterleave * quant::block_bytes<F>, unpacked);
                return unpacked + (row % quant::kInterleave) * quant::block_bytes<F>;
            }
            return blocks + index * quant::block_bytes<F>;  // the rows after the last group stay as blocks
        };
        std::int64_t decoded_block = -1;
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t at = scratch.indexes[i];
            check(at >= 0 && at < total, op.name.data(), "node {}: index {} at {} is outside the {} elements of the "
                  "weight", node, at, i, total);
            if (at / block != decoded_block) {  // an embedding row reads each block `block` times in a row
                decoded_block = at / block;
                quant::decode_block<F>(block_at(decoded_block), decoded);
            }
            out[i] = decoded[at % block];
        }
    });
}

// The file's [rows, cols] blocks of format f repacked with 8 rows interleaved
// into `out`; the rows after the last whole group are copied as they are.
inline void interleave_weight(QuantFormat f, std::int64_t rows, std::int64_t cols, const std::byte* blocks,
                              std::byte* out, ThreadPool& pool) {
    quant::with_format(f, [&]<QuantFormat F>() {
        const std::int64_t row_bytes = quantized_bytes(F, 1, cols), whole = rows / quant::kInterleave;
        pool.parallel_for(whole, 16, [&](std::int64_t g0, std::int64_t g1) {
            quant::interleave_groups<F>(blocks, cols, g0, g1, out);
        });
        const std::int64_t tail = whole * quant::kInterleave * row_bytes;
        std::memcpy(out + tail, blocks + tail, static_cast<std::size_t>(rows * row_bytes - tail));
    });
}

// The inverse of interleave_weight.
inline void deinterleave_weight(QuantFormat f, std::int64_t rows, std::int64_t cols, const std::byte* interleaved,
                                std::byte* blocks, ThreadPool& pool) {
    quant::with_format(f, [&]<QuantFormat F>() {
        const std::int64_t row_bytes = quantized_bytes(F, 1, cols), whole = rows / quant::kInterleave;
        const std::int64_t group_bytes = quant::kInterleave * row_bytes;
        pool.parallel_for(whole, 16, [&](std::int64_t g0, std::int64_t g1) {
            for (std::int64_t g = g0; g < g1; ++g)
                quant::deinterleave_group<F>(interleaved + g * group_bytes, cols, blocks + g * group_bytes);
        });
        const std::int64_t tail = whole * group_bytes;
        std::memcpy(blocks + tail, interleaved + tail, static_cast<std::size_t>(rows * row_bytes - tail));
    });
}

inline void dequantize(const DequantizeOp& op, const std::byte* blocks_src, const StridedView& blocks_view, float* out,
                       std::int64_t n, std::uint32_t node, quant::Isa isa, ThreadPool& pool) {
    using namespace quantized_detail;
    const std::int64_t row_bytes = quantized_bytes(op.format, 1, op.cols);
    const std::byte* blocks = contiguous_blocks(blocks_view, blocks_src, op.format, op.rows, op.cols, op.name, node);
    check(n == op.rows * op.cols, op.name.data(), "node {}: {} outputs for a [{}, {}] weight", node, n, op.rows, op.cols);
    quant::with_format(op.format, [&]<QuantFormat F>() {
        pool.parallel_for(op.rows, kRowGrain, [&](std::int64_t j0, std::int64_t j1) {
            quant::decode_rows<F>(isa, quant::ProductTask{blocks, row_bytes, op.cols, j0, j1, out, 0},
                                  out + j0 * op.cols);
        });
    });
}

}  // namespace luminal::cpu

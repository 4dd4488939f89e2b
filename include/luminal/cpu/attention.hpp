#pragma once
// Attention (lowering/attention.hpp) on the CPU. One task is a KV head and a
// block of kRowBlock query positions, for all G query heads that share the
// head's keys: the keys and values the block can see are widened once into
// f32 panels, then scores = q k^T, the masked softmax and p v, with both
// products on Eigen's GEMM. Keys after every row's last finite bias (a causal
// mask's future) are neither read nor multiplied, so a prompt's attention
// does about half the products of the decomposed graph, and its [S, T]
// scores stay in the task's scratch instead of passing through memory once
// per softmax step.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "luminal/cpu/few_rows.hpp"
#include "luminal/cpu/fused.hpp"
#include "luminal/cpu/matmul.hpp"
#include "luminal/cpu/thread_pool.hpp"
#include "luminal/cpu/view.hpp"
#include "luminal/lowering/attention.hpp"

namespace luminal::cpu {

// Per-part working memory of the attention kernel (reused across nodes).
struct AttentionScratch {
    struct Part {
        std::vector<float> bias, q, keys, values, weights, out, totals, column;
    };
    std::vector<Part> parts;
    std::vector<few_rows::Batch> batches;
    few_rows::Scratch few;
};

// Buffer positions of an operand's elements when its view neither pads nor
// masks: base + sum over axes of index * stride.
struct PlainRows {
    std::int64_t base = 0;
    std::array<std::int64_t, 4> stride{};
    static std::optional<PlainRows> of(const ShapeTracker& view, const DynMap& dims) {
        if (view.rank() != 4 || view.is_padded_or_masked()) return std::nullopt;
        PlainRows r{view.base().eval(dims), {}};
        for (std::size_t a = 0; a < 4; ++a) {
            r.stride[a] = view.axes()[a].stride.eval(dims);
            r.base += view.axes()[a].offset.eval(dims) * r.stride[a];
        }
        return r;
    }
};

// One input of the attention: its buffer, dtype and view.
struct AttentionOperand {
    DType dtype;
    const std::byte* data;
    const StridedView* view;
    std::optional<PlainRows> plain;
    // dst[0 .. len) = logical elements start .. start + len as f32.
    void load(std::int64_t start, std::int64_t len, float* dst) const { load_view(dtype, data, *view, start, len, dst); }
    // dst[0 .. n) = buffer elements position .. position + n as f32.
    void widen(std::int64_t position, std::int64_t n, float* dst) const {
        if (dtype == DType::F32) {
            std::copy_n(reinterpret_cast<const float*>(data) + position, n, dst);
        } else if (dtype == DType::F16) {
            const auto* bits = reinterpret_cast<const std::uint16_t*>(data) + position;
            std::int64_t i = 0;
#ifdef __F16C__
            for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))));
#endif
            for (; i < n; ++i) dst[i] = f16_bits_to_f32(bits[i]);
        } else {
            load_view(dtype, data, StridedView::contiguous(n, position), 0, n, dst);
        }
    }
    // Whether axis `inner`'s elements are adjacent in the buffer (rows read with widen).
    bool unit_stride(std::size_t inner) const { return plain && plain->stride[inner] == 1; }
};

namespace attention_detail {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
inline constexpr std::int64_t kRowBlock = 32;

// Keys a block of `rows` bias rows of length t sees: through the last finite bias of any row.
inline std::int64_t keys_seen(const float* bias, std::int64_t rows, std::int64_t t) {
    std::int64_t seen = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* row = bias + r * t;
        std::int64_t last = t;
        while (last > seen && std::isinf(row[last - 1]) && row[last - 1] < 0) --last;
        seen = std::max(seen, last);
    }
    return seen;
}

// keys_out [seen, D] and values_out [seen, DV] of KV head h (G index 0), row by row where the view allows.
inline void widen_panels(const AttentionOperand& keys, const AttentionOperand& values, std::int64_t h, std::int64_t group,
                         std::int64_t t, std::int64_t d, std::int64_t dv, std::int64_t seen, AttentionScratch::Part& w) {
    w.keys.resize(static_cast<std::size_t>(std::max<std::int64_t>(seen, 1) * d));
    if (keys.unit_stride(3)) {
        const PlainRows& k = *keys.plain;
        for (std::int64_t j = 0; j < seen; ++j) keys.widen(k.base + h * k.stride[0] + j * k.stride[2], d, w.keys.data() + j * d);
    } else {
        keys.load(h * group * t * d, seen * d, w.keys.data());
    }
    w.values.resize(static_cast<std::size_t>(std::max<std::int64_t>(seen, 1) * dv));
    if (values.unit_stride(2)) {
        const PlainRows& v = *values.plain;
        for (std::int64_t j = 0; j < seen; ++j) values.widen(v.base + h * v.stride[0] + j * v.stride[3], dv, w.values.data() + j * dv);
        return;
    }
    w.column.resize(static_cast<std::size_t>(std::max<std::int64_t>(seen, 1)));
    for (std::int64_t e = 0; e < dv; ++e) {
        values.load((h * group * dv + e) * t, seen, w.column.data());
        for (std::int64_t j = 0; j < seen; ++j) w.values[static_cast<std::size_t>(j * dv + e)] = w.column[static_cast<std::size_t>(j)];
    }
}

// Row r of weights [rows, seen]: exp(scale * product + bias - the row's maximum), as the graph's
// softmax computes it (exp2 of the difference times log2 e); totals[r] their sum.
inline void softmax_rows(float scale, const float* bias, std::int64_t t, std::int64_t rows, std::int64_t seen, float* weights,
                         float* totals) {
    constexpr float kLog2e = 1.4426950408889634f;
    for (std::int64_t r = 0; r < rows; ++r) {
        float* p = weights + r * seen;
        const float* b = bias + r * t;
        float best = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < seen; ++j) {
            p[j] = scale * p[j] + b[j];
            best = std::max(best, p[j]);
        }
        float total = 0;
        for (std::int64_t j = 0; j < seen; ++j) {
            p[j] = fused_detail::exp2_lane((p[j] - best) * kLog2e);
            total += p[j];
        }
        totals[r] = total;
    }
}

// A decode step's attention (at most few_rows::kMaxRows queries per head) on
// few_rows.hpp's products, which read the 16-bit cache in place in address
// order: scores for every head, the softmax, then the weighted values. The
// panels of the block path would widen every key and value once per step
// for one query row.
template <DType D>
void few_rows_attention(const AttentionOp& op, const AttentionOperand& q, const AttentionOperand& keys,
                        const AttentionOperand& values, const AttentionOperand& bias, std::int64_t heads,
                        std::int64_t group, std::int64_t s, std::int64_t d, std::int64_t t, std::int64_t dv, float* out,
                        quant::Isa isa, ThreadPool& pool, AttentionScratch& scratch) {
    const std::int64_t count = heads * group, all_rows = count * s;
    AttentionScratch::Part& w = scratch.parts[0];
    w.q.resize(static_cast<std::size_t>(all_rows * d));
    w.bias.resize(static_cast<std::size_t>(all_rows * t));
    q.load(0, all_rows * d, w.q.data());
    bias.load(0, all_rows * t, w.bias.data());
    const std::int64_t seen = keys_seen(w.bias.data(), all_rows, t);
    const PlainRows &k = *keys.plain, &v = *values.plain;
    auto element = [](const AttentionOperand& o, std::int64_t position) {
        return static_cast<const void*>(o.data + position * static_cast<std::int64_t>(size_of(D)));
    };
    w.weights.resize(static_cast<std::size_t>(std::max<std::int64_t>(all_rows * seen, 1)));
    scratch.batches.resize(static_cast<std::size_t>(count));
    for (std::int64_t b = 0; b < count; ++b)
        scratch.batches[b] = {w.q.data() + b * s * d, element(keys, k.base + b / group * k.stride[0]), w.weights.data() + b * s * seen};
    few_rows::rows_product<D>(isa, scratch.batches.data(), count, s, d, d, seen, k.stride[2], seen, &pool);
    w.totals.resize(static_cast<std::size_t>(all_rows));
    softmax_rows(static_cast<float>(op.scale), w.bias.data(), t, all_rows, seen, w.weights.data(), w.totals.data());
    for (std::int64_t b = 0; b < count; ++b)
        scratch.batches[b] = {w.weights.data() + b * s * seen, element(values, v.base + b / group * v.stride[0]), out + b * s * dv};
    few_rows::columns_product<D>(isa, scratch.batches.data(), count, s, seen, seen, 1, dv, v.stride[3], dv, scratch.few, &pool);
    for (std::int64_t r = 0; r < all_rows; ++r) {
        const float inverse = 1.0f / w.totals[static_cast<std::size_t>(r)];
        for (std::int64_t e = 0; e < dv; ++e) out[r * dv + e] *= inverse;
    }
}

}  // namespace attention_detail

// out [KV, G, S, DV] = softmax(scale * q k^T + bias) v for q [KV, G, S, D],
// keys [KV, G, T, D] and values [KV, G, DV, T] (read at G index 0: the rule
// takes only keys and values broadcast over G), bias [KV, G, S, T]. Each
// operand's `plain` is set where its view neither pads nor masks. A decode
// step's few rows take few_rows_attention.
inline void attention(const AttentionOp& op, const AttentionOperand& q, const AttentionOperand& keys,
                      const AttentionOperand& values, const AttentionOperand& bias, std::int64_t heads,
                      std::int64_t group, std::int64_t s, std::int64_t d, std::int64_t t, std::int64_t dv, float* out,
                      quant::Isa isa, ThreadPool& pool, AttentionScratch& scratch) {
    using namespace attention_detail;
    scratch.parts.resize(static_cast<std::size_t>(pool.max_parts()));
    const DType stored = keys.dtype;
    if (s <= few_rows::kMaxRows && values.dtype == stored && keys.unit_stride(3) && values.unit_stride(2)) {
        if (stored == DType::F16)
            return few_rows_attention<DType::F16>(op, q, keys, values, bias, heads, group, s, d, t, dv, out, isa, pool, scratch);
        if (stored == DType::BF16)
            return few_rows_attention<DType::BF16>(op, q, keys, values, bias, heads, group, s, d, t, dv, out, isa, pool, scratch);
        if (stored == DType::F32)
            return few_rows_attention<DType::F32>(op, q, keys, values, bias, heads, group, s, d, t, dv, out, isa, pool, scratch);
    }
    const std::int64_t blocks = (s + kRowBlock - 1) / kRowBlock;
    pool.parallel_parts(heads * blocks, 1, [&](std::int64_t part, std::int64_t begin, std::int64_t end) {
        AttentionScratch::Part& w = scratch.parts[static_cast<std::size_t>(part)];
        for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t h = task / blocks, i0 = task % blocks * kRowBlock, rows = std::min(kRowBlock, s - i0);
            const std::int64_t all_rows = group * rows;  // query head g's rows at g * rows
            w.bias.resize(static_cast<std::size_t>(all_rows * t));
            w.q.resize(static_cast<std::size_t>(all_rows * d));
            for (std::int64_t g = 0; g < group; ++g) {
                bias.load(((h * group + g) * s + i0) * t, rows * t, w.bias.data() + g * rows * t);
                q.load(((h * group + g) * s + i0) * d, rows * d, w.q.data() + g * rows * d);
            }
            const std::int64_t seen = keys_seen(w.bias.data(), all_rows, t);
            widen_panels(keys, values, h, group, t, d, dv, seen, w);

            w.weights.resize(static_cast<std::size_t>(all_rows * std::max<std::int64_t>(seen, 1)));
            Eigen::Map<RowMajor> weights(w.weights.data(), all_rows, seen);
            weights.noalias() = Eigen::Map<const RowMajor>(w.q.data(), all_rows, d) *
                                Eigen::Map<const RowMajor>(w.keys.data(), seen, d).transpose();
            w.totals.resize(static_cast<std::size_t>(all_rows));
            softmax_rows(static_cast<float>(op.scale), w.bias.data(), t, all_rows, seen, w.weights.data(), w.totals.data());

            w.out.resize(static_cast<std::size_t>(all_rows * dv));
            Eigen::Map<RowMajor> weighted(w.out.data(), all_rows, dv);
            if (seen > 0)
                weighted.noalias() = weights * Eigen::Map<const RowMajor>(w.values.data(), seen, dv);
            else
                weighted.setZero();
            for (std::int64_t r = 0; r < all_rows; ++r) {
                const std::int64_t g = r / rows, i = r % rows;
                const float inverse = 1.0f / w.totals[static_cast<std::size_t>(r)];
                float* o = out + ((h * group + g) * s + i0 + i) * dv;
                for (std::int64_t e = 0; e < dv; ++e) o[e] = w.out[static_cast<std::size_t>(r * dv + e)] * inverse;
            }
        }
    });
}

}  // namespace luminal::cpu

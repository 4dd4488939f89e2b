#pragma once
// Flash-decoding attention as a custom kernel. The grid is KV heads x splits
// of the keys, enough blocks to fill the GPU (splits from the SM count, each
// at least kMinKeysPerSplit keys). A block holds all query rows of its KV
// head (tiles of kRowTile: the query heads of a GQA group share every key and
// value load) and walks its keys: each key's 16-byte chunks spread over the
// lanes of a lane group, scores summed in the group, an online softmax per
// row, the weighted values accumulated in registers; key groups, then warps,
// merge their partial (max, sum, values) by log-sum-exp. With several splits
// each block writes its partial result to the scratch buffer and the last
// block of a KV head (a counter it resets) merges them into the output.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "luminal/lowering/attention.hpp"
#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/kernel_ir.hpp"

namespace luminal::cuda {

inline constexpr int kRowTile = 4;            // query rows a block's registers hold at once
inline constexpr std::int64_t kMinKeysPerSplit = 32;
inline constexpr int kKeyUnroll = 2;          // keys each lane group loads before it computes
inline constexpr std::int64_t kMaxSplits = 256;  // the last block keeps one factor per split in shared memory
inline constexpr int kMergeUnroll = 8;         // splits whose values the last block loads before it adds them
inline constexpr std::int64_t kMaxDepth = 256;   // the warps' merged rows fill 32 KiB of shared memory at this depth
// The scratch buffer starts with one split counter per KV head, in whole
// 256-byte lines so the partials after them stay aligned.
inline std::int64_t counter_words(std::int64_t kv_heads) { return (kv_heads + 63) / 64 * 64; }

struct AttentionKernel final : CustomKernel {
    std::vector<DType> inputs;  // q, k, v, bias
    ShapeTracker q_view, k_view, v_view, bias_view;
    Expression heads, group, tokens, keys;  // KV, G, S, T
    std::int64_t depth = 0;                 // D = DV
    double scale = 1;
    std::uint32_t node = 0;

    int vector_width() const { return static_cast<int>(16 / size_of(inputs[1])); }
    int lanes_per_key() const { return static_cast<int>(std::min<std::int64_t>(32, depth / vector_width())); }
    int chunks_per_lane() const { return static_cast<int>(depth / vector_width() / lanes_per_key()); }

    std::int64_t splits(const DynMap& dims, int multiprocessors) const {
        const std::int64_t h = std::max<std::int64_t>(heads.eval(dims), 1), t = keys.eval(dims);
        const std::int64_t wanted = (2 * multiprocessors + h - 1) / h;
        return std::clamp<std::int64_t>(std::min(wanted, (t + kMinKeysPerSplit - 1) / kMinKeysPerSplit), 1, kMaxSplits);
    }
    std::int64_t rows(const DynMap& dims) const { return group.eval(dims) * tokens.eval(dims); }

    std::string source() const override;  // attention_source.hpp
    std::string_view entry() const override { return "luminal_attention"; }

    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        const std::int64_t h = heads.eval(dims);
        g.grid = rows(dims) == 0 || keys.eval(dims) == 0 ? 0u : static_cast<unsigned>(h * splits(dims, multiprocessors));
        g.block = kThreadsPerBlock;
        return g;
    }
    // The scratch is sized for the most splits any device takes (the kernel reads the split count off its grid).
    std::size_t scratch_bytes(const DynMap& dims) const override {
        const std::int64_t h = heads.eval(dims), most = splits(dims, 1 << 12);
        return static_cast<std::size_t>(counter_words(h) + h * most * rows(dims) * (depth + 2)) * sizeof(float);
    }

    // Priced by its bytes, its instructions (the SASS's main loop times the trips the warps make) and the
    // round trips on a block's path that no other load hides: the queries (L2), each trip of the key loop
    // (DRAM), and with several splits the fence and counter, then the last block's reads of the partials
    // (the maxima, the sums, the values a merge unroll at a time).
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double h = static_cast<double>(heads.eval(dims)), t = static_cast<double>(keys.eval(dims)),
                     r = static_cast<double>(rows(dims)), d = static_cast<double>(depth);
        const double split_count = g.grid > 0 ? static_cast<double>(g.grid) / h : 1;
        const double tiles = std::ceil(r / kRowTile);
        w.grid = g.grid;
        w.block = static_cast<int>(g.block);
        add_read(w, sources[0], h * r * d, device);
        for (int kv : {1, 2}) {
            add_read(w, sources[kv], h * t * d, device);
            (from_l2(sources[kv], device) ? w.l2_rereads : w.dram_read) += (tiles - 1) * h * t * d * static_cast<double>(size_of(sources[kv].dtype));
        }
        add_read(w, sources[3], h * r * t, device);
        add_write(w, h * r * d * sizeof(float), device);
        if (split_count > 1) w.l2_rereads += 2 * h * split_count * r * (d + 2) * sizeof(float);
        w.dram_in_flight = static_cast<double>(kKeyUnroll * 2 * 16 * chunks_per_lane());
        w.l2_in_flight = 16;
        w.flops = h * r * t * (4 * d + 8);
        const double warps = static_cast<double>(kThreadsPerBlock / 32), per_split = std::ceil(t / split_count);
        const double keys_per_trip = warps * (32.0 / lanes_per_key()) * kKeyUnroll;
        const double trips = std::ceil(per_split / keys_per_trip);
        w.loop_trips = static_cast<double>(g.grid) * warps * tiles * trips;
        w.dram_round_trips = tiles * trips;
        w.l2_round_trips = tiles;
        if (split_count > 1) w.l2_round_trips += 4 + std::ceil(r / warps) * (2 + std::ceil(split_count / kMergeUnroll));
        return w;
    }

    // Two passes per row in f32: the scores and their maximum, then the weighted values.
    void interpret(const KernelBuffers& b) const override {
        const DynMap& dims = b.dims;
        const std::int64_t kv = heads.eval(dims), g = group.eval(dims), s = tokens.eval(dims), t = keys.eval(dims), d = depth;
        const Expression qp = q_view.index_expression().bind(dims), kp = k_view.index_expression().bind(dims),
                         vp = v_view.index_expression().bind(dims), bp = bias_view.index_expression().bind(dims);
        auto at = [&](std::size_t input, const Expression& position, std::int64_t element) {
            const std::int64_t p = position.eval(dims, element);
            const HostBuffer& in = *b.inputs[input];
            check(p >= 0 && p < static_cast<std::int64_t>(in.size()), "cuda kernel", "node {} reads position {} of a {}-element buffer",
                  node, p, in.size());
            return static_cast<float>(in.as_double(static_cast<std::size_t>(p)));
        };
        std::vector<float> scores(static_cast<std::size_t>(t));
        for (std::int64_t h = 0; h < kv; ++h)
            for (std::int64_t gi = 0; gi < g * s; ++gi) {
                const std::int64_t row = h * g * s + gi, head_row = h * g + gi / s;
                float best = -std::numeric_limits<float>::infinity();
                for (std::int64_t j = 0; j < t; ++j) {
                    float dot = 0;
                    for (std::int64_t e = 0; e < d; ++e)
                        dot = std::fma(at(0, qp, row * d + e), at(1, kp, (head_row * t + j) * d + e), dot);
                    scores[j] = static_cast<float>(scale) * dot + at(3, bp, row * t + j);
                    best = std::max(best, scores[j]);
                }
                float total = 0;
                for (std::int64_t j = 0; j < t; ++j) total += scores[j] = std::isinf(best) && best < 0 ? 0.0f : std::exp(scores[j] - best);
                for (std::int64_t e = 0; e < d; ++e) {
                    float acc = 0;
                    for (std::int64_t j = 0; j < t; ++j) acc = std::fma(scores[j], at(2, vp, (head_row * d + e) * t + j), acc);
                    b.out.store_double(static_cast<std::size_t>(row * d + e), acc / total);
                }
            }
    }
};

inline std::shared_ptr<const AttentionKernel> attention_kernel(const NodeSpec& spec, const AttentionOp& op,
                                                               std::span<const DType> dtypes, std::uint32_t node) {
    auto k = std::make_shared<AttentionKernel>();
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->q_view = spec.views[0];
    k->k_view = spec.views[1];
    k->v_view = spec.views[2];
    k->bias_view = spec.views[3];
    k->heads = spec.views[0].dim(0);
    k->group = spec.views[0].dim(1);
    k->tokens = spec.views[0].dim(2);
    k->keys = spec.views[1].dim(2);
    k->depth = spec.views[0].dim(3).as_constant().value_or(0);
    k->scale = op.scale;
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/attention_source.hpp"

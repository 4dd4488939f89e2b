#pragma once
// cuda.FlashAttention: Attention (lowering/attention.hpp) over a 16-bit cache
// for prompts, on tensor cores (mma.sync m16n8k16, f32 accumulation). A block
// takes kFlashRows query rows of one KV head, the rows of all its query heads
// in position order (row f is position f / G of head f % G), so each key and
// value tile is loaded once for the whole GQA group, and walks the keys
// kFlashKeys at a time with an online softmax: scores = Q K^T, their bias,
// P = exp(scores - running max), O += P V. Each warp holds 16 rows.
//
// Before a tile's keys are loaded, every thread reads the bias of its rows
// there; a tile whose bias is -inf for every row of the block (a causal
// mask's future, a sliding window's past) is skipped. So any bias is exact,
// and the work follows the mask.
//
// Attention to within f32 accumulation, not bf16 rounding: each f32 value a
// product takes is carried as bf16 parts multiplied in turn against the stored
// keys and values (hi = bf16(x), mid = bf16(x - hi), lo = the rest; each part
// takes the next 8 of the 24 significand bits). An f32 query takes all three,
// so its scores are exact; a bf16 query (rounded by the model, read as stored)
// one. A weight in [0, 1] takes two, hi and mid: within 2^-18 of itself, below
// the rounding of the f32 sums it enters. The source is
// flash_attention_source.hpp.
//
// It writes Attention's [KV, G, S, D] in f32, or, where the model next lays
// the heads side by side per position and rounds them (the input of o_proj),
// those rows directly: [S, KV * G * D] in that dtype, the f32 result rounded
// once more, as the cast it replaces did.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "luminal/cuda/causal_mask.hpp"
#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/lowering/attention.hpp"

namespace luminal::cuda {

inline constexpr int kFlashRows = 64;     // query rows of a block: 4 m16 tiles
inline constexpr int kFlashKeys = 64;     // keys of a tile: 8 n8 tiles of scores, 4 k16 steps of P V
inline constexpr int kFlashQueryParts = 3;   // bf16 parts of an f32 query: exact
inline constexpr int kFlashWeightParts = 2;  // bf16 parts of a weight: within 2^-18
inline constexpr int kFlashThreads = 128; // a warp per m16 tile
inline constexpr int kFlashPad = 8;       // bf16 values after each staged row (conflict-free fragment loads)

// Attention's result (in f32) of the inputs `call` reads; where `token_rows`, laid out as
// [S, KV * G * D] and rounded again to the output's dtype.
inline void flash_attention_reference(const ReferenceCall& call, double scale, bool token_rows) {
    if (!token_rows) return AttentionOp{scale}.reference(call);
    const ReferenceInput& q = call.inputs[0];
    const std::int64_t heads = q.dim(0) * q.dim(1), tokens = q.dim(2), depth = q.dim(3);
    HostBuffer attended(DType::F32, call.out.size());
    AttentionOp{scale}.reference(ReferenceCall{call.inputs, attended, call.dims, call.node});
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t t = 0; t < tokens; ++t)
            for (std::int64_t e = 0; e < depth; ++e)
                call.out.store_double(static_cast<std::size_t>((t * heads + h) * depth + e),
                                      attended.as_double(static_cast<std::size_t>((h * tokens + t) * depth + e)));
}

struct FlashAttentionOp {
    static constexpr std::string_view name = "cuda.FlashAttention";
    double scale = 1;
    std::optional<CausalMask> mask;  // the bias as recognised, for pricing only
    bool token_rows = false;         // writes [S, KV * G * D] in `out`, else [KV, G, S, D] in f32
    DType out = DType::F32;

    bool operator==(const FlashAttentionOp&) const = default;
    std::size_t hash() const {
        return std::hash<double>{}(scale) * 31 + (mask ? mask->hash() : 0) + 0xF1A5u + (token_rows ? 0x70C0u + static_cast<std::size_t>(out) : 0);
    }
    std::string attributes() const {
        std::string text = fmt::format("scale={:.6g}", scale);
        if (mask)
            text += fmt::format(" causal from {}{}", mask->offset.to_string(), mask->window ? fmt::format(" window {}", *mask->window) : "");
        if (token_rows) text += fmt::format(" token rows {}", name_of(out));
        return text;
    }
    Shape shape(std::span<const ShapeTracker> inputs) const {
        if (!token_rows) return AttentionOp{scale}.shape(inputs);
        const ShapeTracker& q = inputs[0];
        return {q.dim(2), q.dim(0) * q.dim(1) * q.dim(3)};
    }
    DType dtype(std::span<const DType>) const { return out; }
    double flops(const OpCostQuery& q) const { return (kFlashQueryParts + kFlashWeightParts) / 2.0 * AttentionOp{scale}.flops(q); }
    // Attention's: the kernel differs from it by f32 rounding only.
    void reference(const ReferenceCall& call) const { flash_attention_reference(call, scale, token_rows); }
};

struct FlashAttentionKernel final : CustomKernel {
    std::vector<DType> inputs;  // q (f32), k, v (bf16), bias
    ShapeTracker q_view, k_view, v_view, bias_view;
    Expression heads, group, tokens, keys;  // KV, G, S, T
    std::int64_t depth = 0;                 // D = DV, a multiple of 16
    double scale = 1;
    std::optional<CausalMask> mask;
    bool token_rows = false;
    DType out = DType::F32;
    std::uint32_t node = 0;

    std::string source() const override;  // flash_attention_source.hpp
    std::string_view entry() const override { return "luminal_flash_attention"; }

    int query_parts() const { return inputs[0] == DType::BF16 ? 1 : kFlashQueryParts; }
    std::int64_t row_blocks(const DynMap& dims) const {
        return (group.eval(dims) * tokens.eval(dims) + kFlashRows - 1) / kFlashRows;
    }
    // bf16 values of the staged queries (three parts), keys and transposed values.
    std::size_t shared_bytes() const {
        const auto row = static_cast<std::size_t>(depth + kFlashPad);
        return ((static_cast<std::size_t>(query_parts()) + 1) * kFlashRows * row + static_cast<std::size_t>(depth) * (kFlashKeys + kFlashPad)) * sizeof(std::uint16_t);
    }

    KernelGeometry geometry(const DynMap& dims, int) const override {
        KernelGeometry g;
        g.grid = keys.eval(dims) == 0 ? 0u : static_cast<unsigned>(heads.eval(dims) * row_blocks(dims));
        g.block = kFlashThreads;
        g.shared_bytes = shared_bytes();
        return g;
    }

    // Key tiles the blocks multiply, summed over a KV head's blocks: under a recognised causal mask the tiles its
    // rows see, else all of them.
    double live_tiles(const DynMap& dims) const {
        const std::int64_t g = group.eval(dims), s = tokens.eval(dims), t = keys.eval(dims), blocks = row_blocks(dims);
        const std::int64_t tiles = (t + kFlashKeys - 1) / kFlashKeys;
        if (!mask) return static_cast<double>(blocks * tiles);
        const std::int64_t offset = mask->offset.eval(dims);
        double live = 0;
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t first = b * kFlashRows / g, last = std::min(s * g - 1, (b + 1) * kFlashRows - 1) / g;
            live += static_cast<double>(causal_live_tiles(*mask, offset, first, last, t, kFlashKeys));
        }
        return live;
    }

    // Priced by its tensor-core products (each part of the queries and of the weights, whole tiles of the tiles it multiplies), its bytes
    // (queries and output once; each live tile's keys and values again from L2 for every block after the
    // first; every tile's bias for every block) and the round trips on a block's path: a bias read per tile,
    // then the tile's keys and values.
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double h = static_cast<double>(heads.eval(dims)), gs = static_cast<double>(group.eval(dims) * tokens.eval(dims)),
                     t = static_cast<double>(keys.eval(dims)), d = static_cast<double>(depth);
        const double blocks = static_cast<double>(row_blocks(dims)), tiles = std::ceil(t / kFlashKeys), live = live_tiles(dims);
        w.grid = g.grid;
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes;
        add_read(w, sources[0], h * gs * d, device);
        for (int kv : {1, 2}) {
            add_read(w, sources[kv], h * t * d, device);
            w.l2_rereads += std::max(0.0, h * live * kFlashKeys - h * t) * d * static_cast<double>(size_of(sources[kv].dtype));
        }
        const double bias_reads = h * blocks * tiles * kFlashRows * kFlashKeys;
        add_read(w, sources[3], std::min(bias_reads, sources[3].elements), device);
        w.l2_rereads += std::max(0.0, bias_reads - sources[3].elements) * static_cast<double>(size_of(sources[3].dtype));
        add_write(w, h * gs * d * static_cast<double>(size_of(out)), device);
        w.mma_flops = static_cast<double>(query_parts() + kFlashWeightParts) * h * live * kFlashRows * kFlashKeys * 2 * d;
        w.flops = h * live * kFlashRows * kFlashKeys * 8;
        w.dram_in_flight = 16;
        w.l2_in_flight = 16.0 * 2 * depth / 8 * kFlashKeys / kFlashThreads;
        w.l2_round_trips = (tiles + live / blocks) + 1;
        return w;
    }

    // Attention's reference in double: the parts make every product exact.
    void interpret(const KernelBuffers& b) const override {
        const ReferenceInput in[] = {{*b.inputs[0], q_view, b.dims, node}, {*b.inputs[1], k_view, b.dims, node},
                                     {*b.inputs[2], v_view, b.dims, node}, {*b.inputs[3], bias_view, b.dims, node}};
        flash_attention_reference(ReferenceCall{in, b.out, b.dims, node}, scale, token_rows);
    }
};

inline std::shared_ptr<const FlashAttentionKernel> flash_attention_kernel(const NodeSpec& spec, const FlashAttentionOp& op,
                                                                         std::span<const DType> dtypes, std::uint32_t node) {
    constexpr const char* name = "cuda FlashAttention";
    check(dtypes.size() == 4 && spec.views.size() == 4, name, "node {}: needs queries, keys, values and the bias", node);
    check((dtypes[0] == DType::F32 || dtypes[0] == DType::BF16) && dtypes[1] == DType::BF16 && dtypes[2] == DType::BF16, name, "node {}: needs f32 or bf16 queries and bf16 keys and values, got {}, {} and {}",
          node, name_of(dtypes[0]), name_of(dtypes[1]), name_of(dtypes[2]));
    auto k = std::make_shared<FlashAttentionKernel>();
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
    check(k->depth > 0 && k->depth % 16 == 0, name, "node {}: the head size must be a constant multiple of 16, got {}", node,
          spec.views[0].dim(3).to_string());
    k->scale = op.scale;
    k->mask = op.mask;
    k->token_rows = op.token_rows;
    k->out = op.out;
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/flash_attention_source.hpp"

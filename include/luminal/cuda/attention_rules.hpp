#pragma once
// Which Attention nodes the CUDA kernels run: flash decoding
// (attention_kernel.hpp) reads keys and values as 16-byte vectors; over a
// bf16 cache the prompt kernel (flash_attention_kernel.hpp) is its
// alternative, the cost model choosing by shape.
#include <vector>

#include "luminal/cuda/attention_kernel.hpp"
#include "luminal/cuda/flash_attention_kernel.hpp"
#include "luminal/lowering/attention_rules.hpp"

namespace luminal::egraph {

namespace attention_detail {

// A 16-byte vector of the innermost axis starts at every position the other axes reach.
inline bool vector_rows(const ShapeTracker& v, std::size_t inner, DType dtype) {
    if (v.is_padded_or_masked() || !(v.axes()[inner].stride == Expression(1))) return false;
    const auto bytes = static_cast<std::int64_t>(size_of(dtype));
    Expression start = v.base();
    for (std::size_t a = 0; a < v.rank(); ++a) {
        start = start + v.axes()[a].offset * v.axes()[a].stride;
        if (a == inner) continue;
        const auto stride = v.axes()[a].stride.as_constant();
        if (!stride || (*stride * bytes) % 16 != 0) return false;
    }
    const auto first = start.as_constant();
    return first && (*first * bytes) % 16 == 0;
}

// The causal mask the bias of keys `keys` is built from (an index expression in its inputs, a few ops up), if any.
inline std::optional<cuda::CausalMask> causal_bias(const EGraph& g, const HlirContext& ctx, ClassId bias, const Expression& keys) {
    constexpr std::size_t kMostClasses = 32;
    std::vector<ClassId> seen{g.find(bias)};
    for (std::size_t i = 0; i < seen.size() && seen.size() < kMostClasses; ++i)
        for (ENodeId n : g.class_nodes(seen[i])) {
            if (!g.alive(n)) continue;
            const NodeSpec& spec = ctx.spec(g, n);
            if (spec.kind == sym(OpKind::Iota) && spec.shape.size() == 2 && spec.shape[1] == keys)
                if (auto mask = cuda::causal_mask_of(spec.op.iota, keys)) return mask;
            for (ClassId c : g.children(n))
                if (std::find(seen.begin(), seen.end(), g.find(c)) == seen.end()) seen.push_back(g.find(c));
        }
    return std::nullopt;
}

}  // namespace attention_detail

struct CudaAttentionReads {
    static constexpr std::string_view rule_name = "cuda.attention";
    // What the kernel reads as 16-byte vectors: keys [KV, G, T, D] and values
    // [KV, G, DV, T] of one float dtype, broadcast over G, D = DV a multiple of
    // the vector width that lane groups split evenly, at most kMaxDepth.
    static bool accepts(const EGraph& g, const HlirContext& ctx, const NodeSpec& spec, ClassId k, ClassId v) {
        using attention_detail::vector_rows;
        const ShapeTracker &qv = spec.views[0], &kv = spec.views[1], &vv = spec.views[2], &bv = spec.views[3];
        if (qv.rank() != 4 || kv.rank() != 4 || vv.rank() != 4 || bv.rank() != 4 || qv.is_padded_or_masked() || bv.is_padded_or_masked())
            return false;
        const DType kt = ctx.facts(g, k).dtype;
        if (kt != ctx.facts(g, v).dtype || !is_float(kt) || !kv.is_broadcast(1) || !vv.is_broadcast(1)) return false;
        const auto d = qv.dim(3).as_constant(), dv = vv.dim(2).as_constant();
        const auto width = static_cast<std::int64_t>(16 / size_of(kt));
        if (!d || !dv || *d != *dv || *d % width != 0 || *d > cuda::kMaxDepth) return false;
        const std::int64_t chunks = *d / width;
        if (chunks > 32 ? chunks % 32 != 0 : (32 % chunks) != 0) return false;
        return vector_rows(kv, 3, kt) && vector_rows(vv, 2, kt);
    }
};

// Attention over a bf16 cache also as the prompt kernel (head sizes a multiple of 16, up to kMaxDepth),
// reading queries the model rounded to bf16 as stored. The bias it was built with, when the rule recognises a
// causal mask in it, prices the tiles the kernel skips.
struct FlashAttentionFromAttention {
    static constexpr std::string_view name = "cuda.flash-attention";
    using pattern = As<"attention", Pat<op_symbol<AttentionOp>, Var<"q">, Var<"k">, Var<"v">, Var<"bias">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& attention = ctx.spec(g, m.node<"attention">());
        const auto d = attention.views[0].dim(3).as_constant();
        return ctx.facts(g, m.var<"k">()).dtype == DType::BF16 && ctx.facts(g, m.var<"v">()).dtype == DType::BF16 &&
               is_float(ctx.facts(g, m.var<"q">()).dtype) && is_float(ctx.facts(g, m.var<"bias">()).dtype) && d && *d % 16 == 0 &&
               *d <= cuda::kMaxDepth;
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec attention = ctx.spec(g, m.node<"attention">());
        const cuda::FlashAttentionOp op{attention.payload_as<AttentionOp>()->scale,
                                        attention_detail::causal_bias(g, ctx, m.var<"bias">(), attention.views[1].dim(2))};
        const ClassId stored = stored_operand(g, ctx, m.var<"q">());
        const ClassId q = ctx.facts(g, stored).dtype == DType::BF16 ? stored : m.var<"q">();
        ClassId children[] = {q, m.var<"k">(), m.var<"v">(), m.var<"bias">()};
        g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(op, attention.views, attention.shape, DType::F32), children));
    }
};

// A region that only rounds the prompt kernel's result, read with the heads of each position side by side
// ([S, KV * G * D], the input of o_proj): the kernel writes those rows itself, in the region's dtype. The
// region's launch and the f32 result's round trip through memory go.
struct FlashAttentionWritesTokenRows {
    static constexpr std::string_view name = "cuda.flash-attention-token-rows";
    using pattern = As<"region", Pat<op_symbol<FusedElementwiseOp>,
                                     As<"flash", Pat<op_symbol<cuda::FlashAttentionOp>, Var<"q">, Var<"k">, Var<"v">, Var<"bias">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& region = ctx.spec(g, m.node<"region">());
        const NodeSpec& flash = ctx.spec(g, m.node<"flash">());
        if (flash.payload_as<cuda::FlashAttentionOp>()->token_rows || !is_float(region.dtype)) return false;
        // Casts alone, through f32 only: one rounding of the f32 result.
        const auto& steps = region.payload_as<FusedElementwiseOp>()->program->steps;
        for (std::size_t i = 0; i < steps.size(); ++i)
            if (steps[i].kind != OpKind::Cast || (i + 1 < steps.size() && steps[i].dtype != DType::F32)) return false;
        const Shape& out = flash.shape;  // [KV, G, S, D]
        const auto heads_by_tokens = ShapeTracker(out).reshape({out[0] * out[1], out[2], out[3]});
        return heads_by_tokens && region.views[0] == heads_by_tokens->permute({1, 0, 2}) &&
               region.shape == Shape{out[2], out[0] * out[1] * out[3]};
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec flash = ctx.spec(g, m.node<"flash">());  // a copy: add_spec may move the specs
        const NodeSpec& region = ctx.spec(g, m.node<"region">());
        cuda::FlashAttentionOp op = *flash.payload_as<cuda::FlashAttentionOp>();
        op.token_rows = true;
        op.out = region.dtype;
        const auto kids = g.children(m.node<"flash">());
        const std::vector<ClassId> children(kids.begin(), kids.end());
        g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(op, flash.views, region.shape, region.dtype), children));
    }
};

}  // namespace luminal::egraph

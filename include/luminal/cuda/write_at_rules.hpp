#pragma once
// A Scatter whose positions are distinct for distinct elements writes each
// element once: a cuda.WriteAt, one pass with no claim table, which computes
// the positions and the region that makes the rows (RoPE's rotation, a cast
// to the cache's dtype) itself. Positions qualify when they are an iota, or
// a region computing a(z) + u with u the same for every element (a cache
// length read from a tensor, as transformers keeps it) and a(z) proven
// distinct (shape/distinct_positions.hpp): a KV cache write of the new rows.
#include "luminal/cuda/body_positions.hpp"
#include "luminal/cuda/region_rules.hpp"
#include "luminal/cuda/write_at_op.hpp"
#include "luminal/shape/distinct_positions.hpp"

namespace luminal::egraph {

namespace write_at_detail {

using namespace region_detail;

// A producer this small, read the same for every element, is computed in the kernel rather than launched.
inline constexpr std::size_t kMaxUniformSteps = 16;
inline constexpr int kMaxUniformDepth = 3;

// As region_detail::append, with each input `source` reads the same for every
// element (the cache length, and the small regions wrapping it as Python
// wraps a negative index) computed by the body itself when an iota or a small
// region makes it, rather than read from a launch of its own.
inline std::uint16_t append_computing_uniform(const EGraph& g, const HlirContext& ctx, Draft& d, const Body& source,
                                              std::span<const ClassId> kids, std::optional<std::uint16_t> at,
                                              const Expression& position, int depth = 0) {
    std::vector<std::uint16_t> remap(source.steps.size());
    for (std::size_t j = 0; j < source.steps.size(); ++j) {
        const Step& s = source.steps[j];
        const bool uniform = s.kind == StepKind::Load && s.at == cuda::kAtElement && !s.view.is_padded_or_masked() &&
                             !s.view.index_expression().uses_index();
        if (uniform && depth < kMaxUniformDepth) {
            Step read;
            read.kind = StepKind::Index;
            read.dtype = DType::I64;
            read.index = s.view.index_expression();
            std::optional<std::uint16_t> value;
            for (ENodeId n : g.class_nodes(g.find(kids[s.input])))
                if (g.alive(n) && ctx.spec(g, n).kind == sym(OpKind::Iota) && !is_float(s.dtype)) {
                    read.index = ctx.spec(g, n).op.iota.substitute_index(read.index);
                    read.dtype = s.dtype;
                    value = d.body.add(read);
                    break;
                }
            auto inner = value ? std::nullopt : producer(g, ctx, kids[s.input]);
            if (inner && inner->first.steps.size() <= kMaxUniformSteps && inner->first.steps.back().dtype == s.dtype) {
                const std::uint16_t element = d.body.add(read);
                value = append_computing_uniform(g, ctx, d, inner->first, inner->second, element, read.index, depth + 1);
            }
            if (value) {
                remap[j] = *value;
                continue;
            }
        }
        remap[j] = append_step(d, s, remap, kids, at, position);
    }
    return remap.back();
}

// Appends to `d` the steps computing the position of element z of a Scatter
// reading `indexes` through `view`, and returns the step holding it, when
// those positions are proven distinct for the Scatter's `count` elements.
inline std::optional<std::uint16_t> append_positions(const EGraph& g, const HlirContext& ctx, Draft& d, ClassId indexes,
                                                     const ShapeTracker& view, const Expression& count) {
    const Expression at = view.index_expression();
    std::optional<std::uint16_t> position;
    for (ENodeId n : g.class_nodes(indexes)) {
        if (!g.alive(n) || ctx.spec(g, n).kind != sym(OpKind::Iota)) continue;
        Step iota;
        iota.kind = StepKind::Index;
        iota.dtype = DType::I64;
        iota.index = ctx.spec(g, n).op.iota.substitute_index(at);
        position = d.body.add(std::move(iota));
        break;
    }
    if (!position) {
        auto region = producer(g, ctx, indexes);
        if (!region || is_float(region->first.steps.back().dtype)) return std::nullopt;
        std::optional<std::uint16_t> element;
        if (!(at == Expression::index())) {
            Step step;
            step.kind = StepKind::Index;
            step.dtype = DType::I64;
            step.index = at;
            element = d.body.add(std::move(step));
        }
        position = append_computing_uniform(g, ctx, d, region->first, region->second, element, at);
        if (d.body.steps.size() > kMaxRegionSteps) return std::nullopt;
    }
    const std::optional<Expression> moving = cuda::moving_part(d.body, *position);
    if (!moving || !distinct_positions(*moving, count)) return std::nullopt;
    return position;
}

}  // namespace write_at_detail

struct ScatterWritesAtPositions {
    static constexpr std::string_view name = "cuda.scatter-write-at";
    using pattern = As<"scatter", Pat<sym(OpKind::Scatter), Var<"dest">, Var<"indexes">, Var<"src">>>;
    static constexpr bool reads_child_classes = true;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        using namespace write_at_detail;
        const NodeSpec scatter = ctx.spec(g, m.node<"scatter">());  // a copy: add_spec may move the specs
        const ShapeTracker &dest_view = scatter.views[0], &index_view = scatter.views[1], &src_view = scatter.views[2];
        if (!reads_whole(scatter, 0) || index_view.is_padded_or_masked()) return;
        const Expression count = index_view.numel();
        const ClassId dest = g.find(m.var<"dest">()), indexes = g.find(m.var<"indexes">()), src = g.find(m.var<"src">());
        // The destination is input 0, then the positions' inputs, then the value's.
        Draft positioned;
        positioned.child(dest);
        const std::optional<std::uint16_t> position = append_positions(g, ctx, positioned, indexes, index_view, count);
        if (!position || positioned.children.size() > kMaxRegionInputs + 1) return;
        auto emit = [&](Draft d) {
            std::vector<ShapeTracker> views{dest_view};
            for (std::size_t i = 1; i < d.children.size(); ++i) views.push_back(ShapeTracker(ctx.facts(g, d.children[i]).shape));
            const std::vector<ClassId> children = d.children;
            g.merge(m.root(g), add_spec(g, ctx,
                                        NodeSpec::backend(cuda::WriteAtOp{std::move(d.body), *position, count}, std::move(views),
                                                          scatter.shape, scatter.dtype),
                                        children));
        };
        Draft plain = positioned;
        Step load;
        load.kind = StepKind::Load;
        load.dtype = ctx.facts(g, src).dtype;
        load.input = plain.child(src);
        load.view = src_view;
        plain.body.add(load);
        emit(std::move(plain));
        if (!src_view.is_contiguous() || !(src_view.numel() == count)) return;
        if (auto inner = producer(g, ctx, src); inner && inner->first.steps.size() <= kMaxRegionSteps) {
            Draft d = positioned;
            append(d, inner->first, inner->second, std::nullopt, Expression::index());
            if (d.children.size() <= kMaxRegionInputs + 1) emit(std::move(d));
        }
    }
};

}  // namespace luminal::egraph

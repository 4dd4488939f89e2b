#pragma once
// A region reading another region through padding (a concatenation: RoPE's
// two rotated halves added back together) computes the producer's steps
// itself, at the position its view maps each element to, masked to 0 where
// the view pads: one kernel instead of one per half and one for the sum.
// The result is a cuda.Region (region_op.hpp); regions reading it grow the
// same way, and FusedElementwise keeps the element-for-element fusions.
#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "luminal/cuda/kernel_lowering.hpp"
#include "luminal/cuda/region_op.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

inline constexpr std::size_t kMaxRegionSteps = 64;
inline constexpr std::size_t kMaxRegionInputs = 8;

namespace region_detail {

using cuda::Body;
using cuda::Step;
using cuda::StepKind;

// A node's computation as a body over its children, each loaded through the node's view.
inline Body body_of(const NodeSpec& spec, std::span<const DType> dtypes) {
    if (const auto* region = spec.payload_as<cuda::RegionOp>()) return region->body;
    Body body;
    std::vector<std::uint16_t> slot;
    for (std::uint16_t i = 0; i < spec.views.size(); ++i) {
        Step s;
        s.kind = StepKind::Load;
        s.dtype = dtypes[i];
        s.input = i;
        s.view = spec.views[i];
        slot.push_back(body.add(std::move(s)));
    }
    cuda::lowering_detail::add_program(body, *spec.payload_as<FusedElementwiseOp>()->program, std::move(slot));
    return body;
}

// The body being built: steps, and the children its loads read.
struct Draft {
    Body body;
    std::vector<ClassId> children;
    std::uint16_t child(ClassId c) {
        for (std::size_t i = 0; i < children.size(); ++i)
            if (children[i] == c) return static_cast<std::uint16_t>(i);
        children.push_back(c);
        return static_cast<std::uint16_t>(children.size() - 1);
    }
};

// Appends step `s` of a body being copied: its operands renumbered by
// `remap` (the copies of the steps before it), its loads to `kids` and, when
// `at` is set, evaluated at that step's value (a position) instead of the
// element: loads at the element load there, index expressions take it as
// their index.
inline std::uint16_t append_step(Draft& d, Step s, std::span<const std::uint16_t> remap, std::span<const ClassId> kids,
                                 std::optional<std::uint16_t> at, const Expression& position) {
    s.a = remap[s.a];
    s.b = remap[s.b];
    if (s.kind == StepKind::Load) {
        s.input = d.child(kids[s.input]);
        if (s.at != cuda::kAtElement) s.at = remap[static_cast<std::size_t>(s.at)];
        else if (at) s.at = *at;
    }
    if (s.kind == StepKind::Index && at) s.index = s.index.substitute_index(position);
    return d.body.add(std::move(s));
}

// Appends `source`'s steps (append_step) and returns the copy of its result.
inline std::uint16_t append(Draft& d, const Body& source, std::span<const ClassId> kids, std::optional<std::uint16_t> at,
                            const Expression& position) {
    std::vector<std::uint16_t> remap(source.steps.size());
    for (std::size_t j = 0; j < source.steps.size(); ++j) remap[j] = append_step(d, source.steps[j], remap, kids, at, position);
    return remap.back();
}

// The producer region in class c (the one with the most steps), with its body.
inline std::optional<std::pair<Body, std::vector<ClassId>>> producer(const EGraph& g, const HlirContext& ctx, ClassId c) {
    std::optional<std::pair<Body, std::vector<ClassId>>> best;
    for (ENodeId n : g.class_nodes(g.find(c))) {
        if (!g.alive(n)) continue;
        const NodeSpec& spec = ctx.spec(g, n);
        if (spec.kind != op_symbol<FusedElementwiseOp> && spec.kind != op_symbol<cuda::RegionOp>) continue;
        std::vector<DType> dtypes;
        std::vector<ClassId> kids;
        for (ClassId k : g.children(n)) {
            dtypes.push_back(ctx.facts(g, k).dtype);
            kids.push_back(g.find(k));
        }
        Body body = body_of(spec, dtypes);
        if (!best || body.steps.size() > best->first.steps.size()) best = std::pair(std::move(body), std::move(kids));
    }
    return best;
}

// Whether a node of spec `spec` loads an input at its element through
// padding: most do not, and are passed over before their body is built.
inline bool loads_through_padding(const NodeSpec& spec) {
    auto padded = [](const ShapeTracker& v) { return v.is_padded_or_masked(); };
    if (const auto* region = spec.payload_as<cuda::RegionOp>())
        return std::any_of(region->body.steps.begin(), region->body.steps.end(), [&](const Step& s) {
            return s.kind == StepKind::Load && s.at == cuda::kAtElement && padded(s.view);
        });
    return std::any_of(spec.views.begin(), spec.views.end(), padded);
}

// Node n with the producers it reads through padding inlined, merged into `root`'s class.
inline void inline_padded_producers(EGraph& g, HlirContext& ctx, ClassId root, ENodeId n) {
    if (!loads_through_padding(ctx.spec(g, n))) return;
    const NodeSpec spec = ctx.spec(g, n);  // a copy: add_spec may move the specs
    std::vector<DType> dtypes;
    std::vector<ClassId> kids;
    for (ClassId k : g.children(n)) {
        dtypes.push_back(ctx.facts(g, k).dtype);
        kids.push_back(g.find(k));
    }
    const Body consumer = body_of(spec, dtypes);
    Draft d;
    std::vector<std::uint16_t> remap(consumer.steps.size());
    bool grew = false;
    for (std::size_t j = 0; j < consumer.steps.size(); ++j) {
        Step s = consumer.steps[j];
        s.a = remap[s.a];
        s.b = remap[s.b];
        std::optional<std::pair<Body, std::vector<ClassId>>> inner;
        if (s.kind == StepKind::Load && s.at == cuda::kAtElement && s.view.is_padded_or_masked()) inner = producer(g, ctx, kids[s.input]);
        if (!inner) {
            if (s.kind == StepKind::Load) {
                s.input = d.child(kids[s.input]);
                if (s.at != cuda::kAtElement) s.at = remap[static_cast<std::size_t>(s.at)];
            }
            remap[j] = d.body.add(std::move(s));
            continue;
        }
        // The producer's element this one reads, and whether it reads padding there.
        const Expression valid = s.view.valid_expression();
        const Expression position = valid * s.view.index_expression();
        Step where;
        where.kind = StepKind::Index;
        where.dtype = DType::I64;
        where.index = position;
        const std::uint16_t at = d.body.add(where);
        where.index = valid;
        const std::uint16_t inside = d.body.add(where);
        const std::uint16_t value = append(d, inner->first, inner->second, at, position);
        Step masked;
        masked.kind = StepKind::Masked;
        masked.dtype = s.dtype;
        masked.a = inside;
        masked.b = value;
        const std::uint16_t kept = d.body.add(masked);
        if (d.body.steps[value].dtype != s.dtype) {
            Step cast = cuda::lowering_detail::op_step(StepKind::Cast, OpKind::Cast, s.dtype, kept);
            remap[j] = d.body.add(cast);
        } else {
            remap[j] = kept;
        }
        grew = true;
    }
    if (!grew || d.body.steps.size() > kMaxRegionSteps || d.children.size() > kMaxRegionInputs) return;
    std::vector<ShapeTracker> views;
    for (ClassId c : d.children) views.push_back(ShapeTracker(ctx.facts(g, c).shape));
    g.merge(root, add_spec(g, ctx, NodeSpec::backend(cuda::RegionOp{std::move(d.body)}, std::move(views), spec.shape, spec.dtype),
                           d.children));
}

}  // namespace region_detail

template <typename Op>
struct RegionInlinesPaddedProducers {
    static constexpr std::string_view name =
        std::is_same_v<Op, FusedElementwiseOp> ? "cuda.region-through-padding" : "cuda.region-grows-through-padding";
    using pattern = As<"region", AnyArity<op_symbol<Op>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 2> reads_child_ops = {op_symbol<FusedElementwiseOp>, op_symbol<cuda::RegionOp>};
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        region_detail::inline_padded_producers(g, ctx, m.root(g), m.template node<"region">());
    }
};

using RegionRules = RuleSet<RegionInlinesPaddedProducers<FusedElementwiseOp>, RegionInlinesPaddedProducers<cuda::RegionOp>>;

}  // namespace luminal::egraph

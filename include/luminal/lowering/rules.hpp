#pragma once
// Backend-neutral lowering rules: alternatives any backend that implements
// the LLIR ops Matmul and FusedElementwise may take.
//  * expand . mul . sum_reduce over the last axis is a GEMM (Matmul);
//  * elementwise primitives become single-step FusedElementwise regions, and a
//    region absorbs a fused producer it reads element for element, or a
//    scalar Constant / an Iota input as a step, so chains run in one pass.
// Region size is capped so rewriting stays linear in practice.
#include <array>

#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/lowering/matmul.hpp"

namespace luminal::egraph {

// SumReduce(Mul(a, b)) over the last axis where the Mul reads a broadcast over
// n and b broadcast over m: out[.., i, j] = sum_k a[.., i, k] * b[.., j, k].
struct MatmulFromMulSum {
    static constexpr std::string_view name = "matmul-from-mul-sum";
    using pattern = As<"sum", Pat<sym(OpKind::SumReduce), As<"mul", Pat<sym(OpKind::Mul), Var<"a">, Var<"b">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& sum = ctx.spec(g, m.node<"sum">());
        const NodeSpec& mul = ctx.spec(g, m.node<"mul">());
        std::size_t r = mul.shape.size();
        if (r < 3 || sum.op.axis != r - 1 || !sum.views[0].is_contiguous() || mul.dtype == DType::Bool) return false;
        auto broadcast = [](const ShapeTracker& v, std::size_t axis) {
            return v.is_broadcast(axis) && v.axis_fully_valid(axis);
        };
        return broadcast(mul.views[0], r - 2) && broadcast(mul.views[1], r - 3);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& sum = ctx.spec(g, m.node<"sum">());
        const NodeSpec& mul = ctx.spec(g, m.node<"mul">());
        std::size_t r = mul.shape.size();
        NodeSpec gemm = NodeSpec::backend(
            MatmulOp{}, {mul.views[0].remove_broadcast_axis(r - 2), mul.views[1].remove_broadcast_axis(r - 3)}, sum.shape,
            sum.dtype);
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(gemm), children));
    }
};

inline constexpr std::size_t kMaxFusedSteps = 32;
inline constexpr std::size_t kMaxFusedInputs = 8;

namespace detail {

inline const FusedProgram& region_program(const NodeSpec& s) { return *s.payload_as<FusedElementwiseOp>()->program; }
inline void set_region_program(NodeSpec& s, std::shared_ptr<const FusedProgram> program) {
    s.op = Op::custom(FusedElementwiseOp{std::move(program)});
    s.kind = s.op.symbol();
}

inline bool binary_step(OpKind k) { return is_binary(k); }
inline bool reads_operand(OpKind k) { return k != OpKind::Constant && k != OpKind::Iota; }

// Rewrites a region's operand slots through `map` (input slot -> new slot) and
// shifts step slots from `old_inputs + j` to `new_inputs + offset + j`.
inline FusedStep remap(FusedStep step, const std::vector<std::uint16_t>& map, std::size_t old_inputs,
                       std::size_t new_inputs, std::size_t offset) {
    auto slot = [&](std::uint16_t s) {
        return s < old_inputs ? map[s] : static_cast<std::uint16_t>(new_inputs + offset + (s - old_inputs));
    };
    if (reads_operand(step.kind)) step.a = slot(step.a);
    if (binary_step(step.kind)) step.b = slot(step.b);
    return step;
}

struct Region {
    std::vector<ClassId> children;
    std::vector<ShapeTracker> views;
    std::uint16_t input(ClassId c, const ShapeTracker& v) {
        for (std::size_t i = 0; i < children.size(); ++i)
            if (children[i] == c && views[i] == v) return static_cast<std::uint16_t>(i);
        children.push_back(c);
        views.push_back(v);
        return static_cast<std::uint16_t>(children.size() - 1);
    }
};

// Rewrites a region into canonical form: steps in operand-first order from the
// result, commutative operands sorted by a structural hash, equal steps shared,
// inputs numbered by first use. Regions that differ only in the order they
// were grown, or in the operand order of + and *, become one e-node.
inline void canonicalize(NodeSpec& f, std::vector<ClassId>& children) {
    const std::size_t n_in = children.size(), n_steps = region_program(f).steps.size();
    std::vector<FusedStep> steps = region_program(f).steps;
    std::vector<std::uint64_t> hash(n_in + n_steps);
    for (std::size_t i = 0; i < n_in; ++i) hash[i] = (std::uint64_t{children[i]} * 0x9E3779B97F4A7C15ull) ^ f.views[i].hash();
    for (std::size_t j = 0; j < n_steps; ++j) {
        FusedStep& st = steps[j];
        if ((st.kind == OpKind::Add || st.kind == OpKind::Mul) && hash[st.b] < hash[st.a]) std::swap(st.a, st.b);
        std::uint64_t h = (static_cast<std::uint64_t>(st.kind) << 8 | static_cast<std::uint64_t>(st.dtype)) * 0x100000001B3ull;
        h ^= std::bit_cast<std::uint64_t>(st.value) + st.iota.structural_key() * 31;
        if (reads_operand(st.kind)) h = (h ^ hash[st.a]) * 0x9E3779B97F4A7C15ull;
        if (binary_step(st.kind)) h = (h ^ (hash[st.b] >> 1)) * 0xC2B2AE3D27D4EB4Full;
        hash[n_in + j] = h;
    }
    // Post-order of the slots the result depends on (operand a before b).
    std::vector<std::size_t> order;
    std::vector<std::uint8_t> seen(n_in + n_steps, 0);
    std::vector<std::pair<std::size_t, bool>> stack{{n_in + n_steps - 1, false}};
    while (!stack.empty()) {
        auto [slot, expanded] = stack.back();
        stack.pop_back();
        if (seen[slot] == 2) continue;
        if (slot < n_in || expanded) {
            seen[slot] = 2;
            order.push_back(slot);
            continue;
        }
        seen[slot] = 1;
        stack.push_back({slot, true});
        const FusedStep& st = steps[slot - n_in];
        if (binary_step(st.kind)) stack.push_back({st.b, false});
        if (reads_operand(st.kind)) stack.push_back({st.a, false});
    }
    std::vector<std::uint16_t> new_slot(n_in + n_steps, 0);
    std::vector<ClassId> new_children;
    std::vector<ShapeTracker> new_views;
    for (std::size_t slot : order)
        if (slot < n_in) {
            new_slot[slot] = static_cast<std::uint16_t>(new_children.size());
            new_children.push_back(children[slot]);
            new_views.push_back(f.views[slot]);
        }
    auto program = std::make_shared<FusedProgram>();
    for (std::size_t slot : order) {
        if (slot < n_in) continue;
        FusedStep step = steps[slot - n_in];
        if (reads_operand(step.kind)) step.a = new_slot[step.a];
        if (binary_step(step.kind)) step.b = new_slot[step.b];
        auto same = std::find(program->steps.begin(), program->steps.end(), step);
        if (same == program->steps.end()) same = program->steps.insert(program->steps.end(), step);
        new_slot[slot] = static_cast<std::uint16_t>(new_children.size() + static_cast<std::size_t>(same - program->steps.begin()));
    }
    f.views = std::move(new_views);
    set_region_program(f, std::move(program));
    children = std::move(new_children);
}

// Replaces input `i` of region f by `prefix` steps (computing it) whose own
// inputs are `prefix_inputs`; returns the merged region spec and children.
inline std::pair<NodeSpec, std::vector<ClassId>> splice(const NodeSpec& f, std::span<const ClassId> f_kids, std::size_t i,
                                                        const std::vector<FusedStep>& prefix,
                                                        const std::vector<std::pair<ClassId, ShapeTracker>>& prefix_inputs) {
    Region region;
    std::vector<std::uint16_t> f_map(f.views.size()), p_map(prefix_inputs.size());
    for (std::size_t k = 0; k < f.views.size(); ++k)
        if (k != i) f_map[k] = region.input(f_kids[k], f.views[k]);
    for (std::size_t k = 0; k < prefix_inputs.size(); ++k) p_map[k] = region.input(prefix_inputs[k].first, prefix_inputs[k].second);
    std::size_t n = region.children.size();
    auto program = std::make_shared<FusedProgram>();
    for (const FusedStep& s : prefix) program->steps.push_back(remap(s, p_map, prefix_inputs.size(), n, 0));
    f_map[i] = static_cast<std::uint16_t>(n + prefix.size() - 1);  // the prefix's result
    for (const FusedStep& s : region_program(f).steps) program->steps.push_back(remap(s, f_map, f.views.size(), n, prefix.size()));
    NodeSpec out = f;
    out.views = region.views;
    detail::set_region_program(out, std::move(program));
    std::vector<ClassId> children = std::move(region.children);
    canonicalize(out, children);
    return {std::move(out), std::move(children)};
}

}  // namespace detail

constexpr std::string_view to_fused_name(OpKind k) {
    switch (k) {
        case OpKind::Log2: return "log2-to-fused";
        case OpKind::Exp2: return "exp2-to-fused";
        case OpKind::Sin: return "sin-to-fused";
        case OpKind::Sqrt: return "sqrt-to-fused";
        case OpKind::Recip: return "recip-to-fused";
        case OpKind::Add: return "add-to-fused";
        case OpKind::Mul: return "mul-to-fused";
        case OpKind::Mod: return "mod-to-fused";
        case OpKind::LessThan: return "less-than-to-fused";
        default: return "cast-to-fused";
    }
}

// One elementwise primitive as a one-step region over the same inputs.
template <OpKind K>
struct ToFused {
    static constexpr std::string_view name = to_fused_name(K);
    using pattern = As<"op", AnyArity<sym(K)>>;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        NodeSpec s = ctx.spec(g, m.template node<"op">());
        auto program = std::make_shared<FusedProgram>();
        program->steps.push_back(FusedStep{K, 0, static_cast<std::uint16_t>(s.views.size() > 1 ? 1 : 0), s.dtype, 0, {}});
        detail::set_region_program(s, std::move(program));
        auto kids = g.children(m.template node<"op">());
        std::vector<ClassId> children(kids.begin(), kids.end());
        detail::canonicalize(s, children);
        g.merge(m.root(g), add_spec(g, ctx, std::move(s), children));
    }
};

// A region grows by one level at a time: it absorbs everything it reads
// element for element at once (one-step producer regions, scalar constants,
// index expressions). Growing level by level gives each root one region per
// depth; absorbing producers one by one would enumerate every connected
// sub-DAG, which is exponential on expressions like gelu.
struct FuseProducer {
    static constexpr std::string_view name = "fuse-producer";
    using pattern = As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 3> reads_child_ops = {sym(OpKind::Constant), sym(OpKind::Iota), op_symbol<FusedElementwiseOp>};

    // The steps computing an absorbed input, and the inputs they read.
    struct Absorbed {
        std::vector<FusedStep> steps;
        std::vector<std::pair<ClassId, ShapeTracker>> inputs;
    };
    // The e-node a region absorbs for input (c, view), and whether it reads its
    // inputs through that view instead of its own views.
    struct Producer {
        ENodeId node;
        bool through_view;
        bool reshaped = false;  // its views put in the region's dims
    };

    // The producer of input (c, view) a region can absorb, if any. What the view
    // itself allows is worked out once, and only if a producer asks.
    static std::optional<Producer> producer(const EGraph& g, const HlirContext& ctx, ClassId c, const ShapeTracker& view,
                                            const Shape& shape) {
        std::optional<bool> pads, in_order, reshaped;
        auto view_pads = [&] { return pads ? *pads : *(pads = has_padding(view)); };
        auto view_in_order = [&] { return in_order ? *in_order : *(in_order = view.is_contiguous() && view.dims() == shape); };
        // Element z of the view is element z of the producer, size-1 axes at any stride (a reshape to [1, H, 1, D]).
        auto view_reshapes_in_order = [&] { return reshaped ? *reshaped : *(reshaped = reads_in_order(view)); };
        // The producer has as many elements as the view reads (not a slice of it) and its own views reshape.
        auto own_views_reshape = [&](const NodeSpec& ps) {
            if (!(product(ps.shape) == product(view.dims()))) return false;
            return std::all_of(ps.views.begin(), ps.views.end(), [&](const ShapeTracker& v) {
                return v.dims() == view.dims() || v.reshape(view.dims()).has_value();
            });
        };
        for (ENodeId p : g.class_nodes(c)) {
            if (!g.alive(p)) continue;
            // The op is in the e-node's own record: most nodes are passed over without reading their spec.
            const Symbol op = g.node(p).op;
            if (op != sym(OpKind::Constant) && op != sym(OpKind::Iota) && op != op_symbol<FusedElementwiseOp>) continue;
            const NodeSpec& ps = ctx.spec(g, p);
            if ((ps.kind == sym(OpKind::Constant) || ps.kind == sym(OpKind::Iota)) && !view_pads()) return Producer{p, false};
            if (ps.kind != op_symbol<FusedElementwiseOp> || detail::region_program(ps).steps.size() != 1) continue;
            if (view_in_order()) return Producer{p, false};
            // Its inputs are then read through its own views put in the region's dims.
            if (view_reshapes_in_order() && own_views_reshape(ps)) return Producer{p, false, true};
            // A producer that reads each input element for element is the same function of its inputs read
            // through the view it is read through (a cast weight read broadcast over the rows): unless the view
            // pads, where the producer of zeros need not be zero.
            const bool elementwise = std::all_of(ps.views.begin(), ps.views.end(), [&](const ShapeTracker& v) {
                return v.is_contiguous() && v.dims() == ps.shape;
            });
            if (!elementwise || view_pads()) continue;
            return Producer{p, true};
        }
        return std::nullopt;
    }

    // The steps computing input `view` inside a region, by the producer found for it.
    static Absorbed absorb(const EGraph& g, const HlirContext& ctx, Producer p, const ShapeTracker& view) {
        const NodeSpec& ps = ctx.spec(g, p.node);
        if (ps.kind == sym(OpKind::Constant)) return Absorbed{{FusedStep{OpKind::Constant, 0, 0, ps.dtype, ps.op.value, {}}}, {}};
        if (ps.kind == sym(OpKind::Iota))
            return Absorbed{{FusedStep{OpKind::Iota, 0, 0, ps.dtype, 0, ps.op.iota.substitute_index(view.index_expression())}}, {}};
        auto kids = g.children(p.node);
        std::vector<std::pair<ClassId, ShapeTracker>> inputs;
        for (std::size_t k = 0; k < kids.size(); ++k) {
            const ShapeTracker& own = ps.views[k];
            const bool put_in_dims = p.reshaped && !(own.dims() == view.dims());
            inputs.push_back({g.find(kids[k]), p.through_view ? view : put_in_dims ? *own.reshape(view.dims()) : own});
        }
        return Absorbed{detail::region_program(ps).steps, std::move(inputs)};
    }

    // Most matches absorb nothing (their inputs have no fused producer yet),
    // and most others are found again after their region grew already (a
    // class they read gained an e-node they do not absorb): what a match can
    // absorb is found, and compared with what it absorbed last time, before
    // any step is built or the region copied to grow.
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const ENodeId matched = m.node<"region">();
        std::vector<std::pair<std::size_t, Producer>> producers;  // by input slot of the matched region
        std::vector<std::uint32_t> reads;
        {
            const NodeSpec& spec = ctx.spec(g, matched);
            const auto kids = g.children(matched);
            for (std::size_t i = 0; i < kids.size(); ++i) {
                reads.push_back(g.find(kids[i]));
                if (auto p = producer(g, ctx, g.find(kids[i]), spec.views[i], spec.shape)) producers.push_back({i, *p});
            }
        }
        if (producers.empty()) return;
        for (const auto& [slot, p] : producers) {
            reads.push_back(static_cast<std::uint32_t>(slot));
            reads.push_back(p.node);
            for (ClassId k : g.children(p.node)) reads.push_back(g.find(k));
        }
        if (ctx.read_before(name, matched, std::move(reads))) return;
        const NodeSpec& matched_spec = ctx.spec(g, matched);
        NodeSpec region = matched_spec;
        auto kids_span = g.children(matched);
        std::vector<ClassId> kids(kids_span.begin(), kids_span.end());
        const std::vector<ClassId> matched_kids = kids;
        bool grew = false;
        for (const auto& [slot, p] : producers) {
            const ClassId c = g.find(matched_kids[slot]);
            const ShapeTracker& view = matched_spec.views[slot];
            // Canonicalisation reorders inputs: find this one again.
            std::size_t i = 0;
            while (i < kids.size() && !(g.find(kids[i]) == c && region.views[i] == view)) ++i;
            if (i == kids.size()) continue;
            const Absorbed inner = absorb(g, ctx, p, view);
            std::tie(region, kids) = detail::splice(region, kids, i, inner.steps, inner.inputs);
            grew = true;
        }
        if (!grew || detail::region_program(region).steps.size() > kMaxFusedSteps || kids.size() > kMaxFusedInputs) return;
        ClassId root = m.root(g);
        g.merge(root, add_spec(g, ctx, std::move(region), kids));
    }
};

// Matmul(a, Cast(b)) where the Cast widens an f16/bf16 b to f32, reading it in
// order: the Matmul reads b as stored instead, so a 16-bit weight matrix is not
// copied to f32 before each product (every backend's Matmul widens exactly as
// the Cast does, so results are unchanged).
struct MatmulReadsNarrowOperand {
    static constexpr std::string_view name = "matmul-reads-narrow-operand";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, As<"cast", Pat<sym(OpKind::Cast), Var<"b">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& cast = ctx.spec(g, m.node<"cast">());
        const DType stored = ctx.facts(g, m.var<"b">()).dtype;
        return cast.dtype == DType::F32 && (stored == DType::BF16 || stored == DType::F16) && reads_whole(cast, 0);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        NodeSpec gemm = ctx.spec(g, m.node<"gemm">());
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(gemm), children));
    }
};

using LoweringRules = RuleSet<MatmulFromMulSum, ToFused<OpKind::Log2>, ToFused<OpKind::Exp2>, ToFused<OpKind::Sin>,
                              ToFused<OpKind::Sqrt>, ToFused<OpKind::Recip>, ToFused<OpKind::Add>, ToFused<OpKind::Mul>,
                              ToFused<OpKind::Mod>, ToFused<OpKind::LessThan>, ToFused<OpKind::Cast>, FuseProducer,
                              MatmulReadsNarrowOperand>;

}  // namespace luminal::egraph

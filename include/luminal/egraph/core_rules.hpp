#pragma once
// Core rules: rewrites every backend gets. They preserve results exactly
// (identities whose operand is read element for element, and folding of
// scalar constants with the runtime's own rounding); commutativity exposes
// both operand orders to backend patterns. Reassociation changes float
// rounding, so it lives in its own rule set that no runtime uses by default.
#include <cmath>

#include "luminal/core/host_buffer.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/graph/primitive_semantics.hpp"

namespace luminal::egraph {

// a + b -> b + a, a * b -> b * a (exact in IEEE arithmetic).
template <OpKind K>
struct Commutes {
    static constexpr std::string_view name = K == OpKind::Add ? "add-commutes" : "mul-commutes";
    using pattern = Pat<sym(K), Var<0>, Var<1>>;
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        NodeSpec s = ctx.spec(g, m.node(0));
        std::swap(s.views[0], s.views[1]);
        ClassId swapped[] = {m.var(1), m.var(0)};
        g.merge(m.root(g), add_spec(g, ctx, std::move(s), swapped));
    }
};

// x * 1 -> x (exact for every value, NaN and -0 included).
struct MulByOne {
    static constexpr std::string_view name = "mul-by-one";
    using pattern = Pat<sym(OpKind::Mul), Var<0>, Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) {
        return reads_whole(ctx.spec(g, m.node(0)), 0) && ctx.spec(g, m.node(1)).op.value == 1;
    }
    static void apply(EGraph& g, HlirContext&, const Match& m) { g.merge(m.root(g), m.var(0)); }
};

// x + 0 -> x for integers (for floats -0 + 0 is +0, so it is not an identity).
struct IntegerAddZero {
    static constexpr std::string_view name = "integer-add-zero";
    using pattern = Pat<sym(OpKind::Add), Var<0>, Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) {
        const NodeSpec& s = ctx.spec(g, m.node(0));
        return !is_float(s.dtype) && reads_whole(s, 0) && ctx.spec(g, m.node(1)).op.value == 0;
    }
    static void apply(EGraph& g, HlirContext&, const Match& m) { g.merge(m.root(g), m.var(0)); }
};

// (x * -1) * -1 -> x.
struct DoubleNegation {
    static constexpr std::string_view name = "double-negation";
    using pattern = Pat<sym(OpKind::Mul), Pat<sym(OpKind::Mul), Var<0>, Pat<sym(OpKind::Constant)>>,
                        Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) {
        return reads_whole(ctx.spec(g, m.node(0)), 0) && reads_whole(ctx.spec(g, m.node(1)), 0) &&
               ctx.spec(g, m.node(2)).op.value == -1 && ctx.spec(g, m.node(3)).op.value == -1;
    }
    static void apply(EGraph& g, HlirContext&, const Match& m) { g.merge(m.root(g), m.var(0)); }
};

// A Cast to the dtype it already has, reading its input in order, is a copy.
struct CastToSameDtype {
    static constexpr std::string_view name = "cast-to-same-dtype";
    using pattern = Pat<sym(OpKind::Cast), Var<0>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) {
        const NodeSpec& s = ctx.spec(g, m.node(0));
        ENodeId producer = g.class_nodes(m.var(0)).front();
        return reads_whole(s, 0) && ctx.spec(g, producer).dtype == s.dtype;
    }
    static void apply(EGraph& g, HlirContext&, const Match& m) { g.merge(m.root(g), m.var(0)); }
};

namespace detail {
inline double rounded(DType dtype, double v) {
    return is_float(dtype) ? round_to(dtype, v) : static_cast<double>(wrap_to(dtype, static_cast<std::int64_t>(v)));
}
inline bool scalar(const NodeSpec& s) { return s.shape.empty(); }
}  // namespace detail

// Scalar constant folding: the result is rounded to the node's dtype exactly
// as the runtime would round it (+, * and 1/x are correctly rounded in f32).
template <OpKind K>
struct FoldScalarBinary {
    static constexpr std::string_view name = K == OpKind::Add ? "fold-scalar-add" : "fold-scalar-mul";
    using pattern = Pat<sym(K), Pat<sym(OpKind::Constant)>, Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) { return detail::scalar(ctx.spec(g, m.node(0))); }
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        DType t = ctx.spec(g, m.node(0)).dtype;
        double a = ctx.spec(g, m.node(1)).op.value, b = ctx.spec(g, m.node(2)).op.value;
        if (!is_float(t)) {
            const std::int64_t r = semantics::binary(K, static_cast<std::int64_t>(a), static_cast<std::int64_t>(b));
            g.merge(m.root(g), add_spec(g, ctx, scalar_constant(static_cast<double>(wrap_to(t, r)), t), {}));
            return;
        }
        double v = detail::rounded(t, semantics::binary(K, a, b));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(v, t), {}));
    }
};

struct FoldScalarRecip {
    static constexpr std::string_view name = "fold-scalar-recip";
    using pattern = Pat<sym(OpKind::Recip), Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) { return detail::scalar(ctx.spec(g, m.node(0))); }
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        DType t = ctx.spec(g, m.node(0)).dtype;
        double v = detail::rounded(t, semantics::unary(OpKind::Recip, ctx.spec(g, m.node(1)).op.value));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(v, t), {}));
    }
};

struct FoldScalarCast {
    static constexpr std::string_view name = "fold-scalar-cast";
    using pattern = Pat<sym(OpKind::Cast), Pat<sym(OpKind::Constant)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) { return detail::scalar(ctx.spec(g, m.node(0))); }
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        DType t = ctx.spec(g, m.node(0)).dtype;
        double v = ctx.spec(g, m.node(1)).op.value;
        double out = is_float(t) ? round_to(t, v) : static_cast<double>(float_to_int(t, v));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(out, t), {}));
    }
};

// A scalar Iota of a constant expression is a constant.
struct FoldConstantIota {
    static constexpr std::string_view name = "fold-constant-iota";
    using pattern = Pat<sym(OpKind::Iota)>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) {
        const NodeSpec& s = ctx.spec(g, m.node(0));
        return detail::scalar(s) && s.op.iota.is_constant();
    }
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        const NodeSpec& s = ctx.spec(g, m.node(0));
        DType t = s.dtype;
        double v = static_cast<double>(wrap_to(t, s.op.iota.constant_value()));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(v, t), {}));
    }
};

using CoreRules = RuleSet<Commutes<OpKind::Add>, Commutes<OpKind::Mul>, MulByOne, IntegerAddZero, DoubleNegation,
                          CastToSameDtype, FoldScalarBinary<OpKind::Add>, FoldScalarBinary<OpKind::Mul>, FoldScalarRecip,
                          FoldScalarCast, FoldConstantIota>;

// x + (y + z) -> (x + y) + z. REASSOCIATES: float results may change in the
// last bits, so no runtime includes it by default; tests use it to stress limits.
struct AddAssociates {
    static constexpr std::string_view name = "add-associates";
    using pattern = Pat<sym(OpKind::Add), Var<0>, Pat<sym(OpKind::Add), Var<1>, Var<2>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const Match& m) { return reads_whole(ctx.spec(g, m.node(0)), 1); }
    static void apply(EGraph& g, HlirContext& ctx, const Match& m) {
        NodeSpec outer = ctx.spec(g, m.node(0));
        const NodeSpec& inner = ctx.spec(g, m.node(1));
        NodeSpec first = outer;  // x + y, with the views x and y had
        first.views = {outer.views[0], inner.views[0]};
        NodeSpec second = outer;
        second.views = {ShapeTracker(outer.shape), inner.views[1]};
        ClassId xy_children[] = {m.var(0), m.var(1)};
        ClassId xy = add_spec(g, ctx, std::move(first), xy_children);
        ClassId rest[] = {xy, m.var(2)};
        g.merge(m.root(g), add_spec(g, ctx, std::move(second), rest));
    }
};

using ReassociationRules = RuleSet<Commutes<OpKind::Add>, AddAssociates>;

}  // namespace luminal::egraph

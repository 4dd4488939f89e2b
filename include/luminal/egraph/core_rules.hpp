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
    using pattern = As<"op", Pat<sym(K), Var<"a">, Var<"b">>>;
    using rhs = Like<"op", Var<"b">, Var<"a">>;
};

// x * 1 -> x (exact for every value, NaN and -0 included).
struct MulByOne {
    static constexpr std::string_view name = "mul-by-one";
    using pattern = As<"mul", Pat<sym(OpKind::Mul), Var<"x">, As<"one", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return reads_whole(ctx.spec(g, m.node<"mul">()), 0) && ctx.spec(g, m.node<"one">()).op.value == 1;
    }
    using rhs = Var<"x">;
};

// x + 0 -> x for integers (for floats -0 + 0 is +0, so it is not an identity).
struct IntegerAddZero {
    static constexpr std::string_view name = "integer-add-zero";
    using pattern = As<"add", Pat<sym(OpKind::Add), Var<"x">, As<"zero", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& add = ctx.spec(g, m.node<"add">());
        return !is_float(add.dtype) && reads_whole(add, 0) && ctx.spec(g, m.node<"zero">()).op.value == 0;
    }
    using rhs = Var<"x">;
};

// (x * -1) * -1 -> x.
struct DoubleNegation {
    static constexpr std::string_view name = "double-negation";
    using pattern = As<"outer", Pat<sym(OpKind::Mul),
                                    As<"inner", Pat<sym(OpKind::Mul), Var<"x">, As<"m1", Pat<sym(OpKind::Constant)>>>>,
                                    As<"m2", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return reads_whole(ctx.spec(g, m.node<"outer">()), 0) && reads_whole(ctx.spec(g, m.node<"inner">()), 0) &&
               ctx.spec(g, m.node<"m1">()).op.value == -1 && ctx.spec(g, m.node<"m2">()).op.value == -1;
    }
    using rhs = Var<"x">;
};

// A Cast to the dtype it already has, reading its input in order, is a copy.
struct CastToSameDtype {
    static constexpr std::string_view name = "cast-to-same-dtype";
    using pattern = As<"cast", Pat<sym(OpKind::Cast), Var<"x">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& cast = ctx.spec(g, m.node<"cast">());
        return reads_whole(cast, 0) && ctx.facts(g, m.var<"x">()).dtype == cast.dtype;
    }
    using rhs = Var<"x">;
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
    using pattern = As<"op", Pat<sym(K), As<"a", Pat<sym(OpKind::Constant)>>, As<"b", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return detail::scalar(ctx.spec(g, m.template node<"op">()));
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        DType t = ctx.spec(g, m.template node<"op">()).dtype;
        double a = ctx.spec(g, m.template node<"a">()).op.value, b = ctx.spec(g, m.template node<"b">()).op.value;
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
    using pattern = As<"recip", Pat<sym(OpKind::Recip), As<"x", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return detail::scalar(ctx.spec(g, m.node<"recip">()));
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        DType t = ctx.spec(g, m.node<"recip">()).dtype;
        double v = detail::rounded(t, semantics::unary(OpKind::Recip, ctx.spec(g, m.node<"x">()).op.value));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(v, t), {}));
    }
};

struct FoldScalarCast {
    static constexpr std::string_view name = "fold-scalar-cast";
    using pattern = As<"cast", Pat<sym(OpKind::Cast), As<"x", Pat<sym(OpKind::Constant)>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return detail::scalar(ctx.spec(g, m.node<"cast">()));
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        DType t = ctx.spec(g, m.node<"cast">()).dtype;
        double v = ctx.spec(g, m.node<"x">()).op.value;
        double out = is_float(t) ? round_to(t, v) : static_cast<double>(float_to_int(t, v));
        g.merge(m.root(g), add_spec(g, ctx, scalar_constant(out, t), {}));
    }
};

// A scalar Iota of a constant expression is a constant.
struct FoldConstantIota {
    static constexpr std::string_view name = "fold-constant-iota";
    using pattern = As<"iota", Pat<sym(OpKind::Iota)>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& s = ctx.spec(g, m.node<"iota">());
        return detail::scalar(s) && s.op.iota.is_constant();
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& s = ctx.spec(g, m.node<"iota">());
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
    using pattern = As<"outer", Pat<sym(OpKind::Add), Var<"x">, As<"inner", Pat<sym(OpKind::Add), Var<"y">, Var<"z">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        return reads_whole(ctx.spec(g, m.node<"outer">()), 1);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        NodeSpec outer = ctx.spec(g, m.node<"outer">());
        const NodeSpec& inner = ctx.spec(g, m.node<"inner">());
        NodeSpec first = outer;  // x + y, with the views x and y had
        first.views = {outer.views[0], inner.views[0]};
        NodeSpec second = outer;
        second.views = {ShapeTracker(outer.shape), inner.views[1]};
        ClassId xy_children[] = {m.var<"x">(), m.var<"y">()};
        ClassId xy = add_spec(g, ctx, std::move(first), xy_children);
        ClassId rest[] = {xy, m.var<"z">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(second), rest));
    }
};

using ReassociationRules = RuleSet<Commutes<OpKind::Add>, AddAssociates>;

}  // namespace luminal::egraph

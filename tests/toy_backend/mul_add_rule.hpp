#pragma once
// The toy backend's rule: Add(Mul(x, y), z) is also a MulAdd, when the Add
// reads the product element for element (so the Mul's views serve the MulAdd).
#include <luminal/egraph/rule_support.hpp>

#include "mul_add_op.hpp"

namespace toy {

using namespace luminal::egraph;

struct MulAddFromAddMul {
    static constexpr std::string_view name = "toy.mul-add";
    using pattern = As<"add", Pat<sym(luminal::OpKind::Add), As<"mul", Pat<sym(luminal::OpKind::Mul), Var<"x">, Var<"y">>>, Var<"z">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const luminal::NodeSpec &add = ctx.spec(g, m.node<"add">()), &mul = ctx.spec(g, m.node<"mul">());
        return reads_whole(add, 0) && mul.shape == add.shape && mul.dtype == add.dtype;
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const luminal::NodeSpec &add = ctx.spec(g, m.node<"add">()), &mul = ctx.spec(g, m.node<"mul">());
        ClassId children[] = {m.var<"x">(), m.var<"y">(), m.var<"z">()};
        g.merge(m.root(g), add_spec(g, ctx,
                                    luminal::NodeSpec::backend(MulAddOp{}, {mul.views[0], mul.views[1], add.views[1]}, add.shape, add.dtype),
                                    children));
    }
};

}  // namespace toy

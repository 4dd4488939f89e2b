#pragma once
// The toy backend's rule: Add(Mul(x, y), z) is also a MulAdd, when the Add
// reads the product element for element (so the Mul's views serve the MulAdd).
#include <luminal/egraph/rule_support.hpp>

#include "mul_add_op.hpp"

namespace toy {

struct MulAddFromAddMul {
    static constexpr std::string_view name = "toy.mul-add";
    using pattern = luminal::egraph::Pat<luminal::egraph::sym(luminal::OpKind::Add),
                                         luminal::egraph::Pat<luminal::egraph::sym(luminal::OpKind::Mul),
                                                              luminal::egraph::Var<0>, luminal::egraph::Var<1>>,
                                         luminal::egraph::Var<2>>;
    static bool guard(const luminal::egraph::EGraph& g, luminal::egraph::HlirContext& ctx, const luminal::egraph::Match& m) {
        const luminal::NodeSpec& add = ctx.spec(g, m.node(0));
        const luminal::NodeSpec& mul = ctx.spec(g, m.node(1));
        return luminal::egraph::reads_whole(add, 0) && mul.shape == add.shape && mul.dtype == add.dtype;
    }
    static void apply(luminal::egraph::EGraph& g, luminal::egraph::HlirContext& ctx, const luminal::egraph::Match& m) {
        const luminal::NodeSpec& add = ctx.spec(g, m.node(0));
        const luminal::NodeSpec& mul = ctx.spec(g, m.node(1));
        luminal::NodeSpec fused =
            luminal::NodeSpec::backend(MulAddOp{}, {mul.views[0], mul.views[1], add.views[1]}, add.shape, add.dtype);
        luminal::egraph::ClassId children[] = {m.var(0), m.var(1), m.var(2)};
        g.merge(m.root(g), luminal::egraph::add_spec(g, ctx, std::move(fused), children));
    }
};

}  // namespace toy

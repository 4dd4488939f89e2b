#pragma once
// The CPU backend's rules: the core rules, the backend-neutral lowering, and
// what is the CPU's own: its Matmul reads a 16-bit float operand as stored.
#include "luminal/egraph/core_rules.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

// Matmul(a, Cast(b)) where the Cast widens an f16/bf16 b to f32, reading it in
// order: the Matmul reads b as stored instead, so a 16-bit weight matrix is not
// copied to f32 before each product (the CPU Matmul widens exactly as the
// Cast does, so results are unchanged).
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

using CpuRules = concat_t<CoreRules, LoweringRules, RuleSet<MatmulReadsNarrowOperand>>;

}  // namespace luminal::egraph

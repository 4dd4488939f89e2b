// Rules over the HLIR language as a rule author writes them: named variables
// and nodes, right-hand sides for pure rewrites, the class facts (dtype,
// shape, constant), and patterns as large as softmax and an attention head.
#include <doctest/doctest.h>

#include <cmath>

#include <luminal/luminal.hpp>

using namespace luminal;
using namespace luminal::egraph;

namespace {

// The softmax and attention-head patterns the Attention rules match (lowering/attention_rules.hpp).
using attention_detail::AttentionHead;
using attention_detail::Softmax;

std::size_t count_matches_of_attention(const HlirEGraph& h, std::vector<ClassId>& scores) {
    std::size_t n = 0;
    for_each_match<AttentionHead>(h.graph, [&](const Match& m) {
        const auto& named = static_cast<const MatchOf<AttentionHead>&>(m);
        scores.push_back(named.var<"scores">());
        ++n;
    });
    return n;
}

}  // namespace

TEST_CASE("a 19-node pattern finds the one attention head of a graph") {
    static_assert(PatternSize<matcher_pattern_t<AttentionHead>>::nodes == 19);
    Graph cx;
    auto q = cx.named_tensor("q", {4, 8}), k = cx.named_tensor("k", {4, 8}), v = cx.named_tensor("v", {4, 8});
    auto scores = q.matmul(k.t()) * (1.0 / std::sqrt(8.0));
    scores.softmax(-1).matmul(v).output();
    (q.softmax(-1) * 2.0).output();  // a softmax that is not an attention head
    HlirEGraph h;
    build_egraph(cx, h);
    h.graph.rebuild();
    std::vector<ClassId> bound;
    CHECK(count_matches_of_attention(h, bound) == 1);
    REQUIRE(bound.size() == 1);
    // The scores variable is bound to the scaled q.k^T product: a Mul of a SumReduce.
    bool scaled_product = false;
    for (ENodeId n : h.graph.class_nodes(bound[0]))
        scaled_product |= h.ctx.spec(h.graph, n).kind == sym(OpKind::Mul) &&
                          h.ctx.spec(h.graph, h.graph.class_nodes(h.graph.children(n)[0]).front()).kind == sym(OpKind::SumReduce);
    CHECK(scaled_product);
    std::size_t softmaxes = 0;
    for_each_match<Softmax<Var<"x">>>(h.graph, [&](const Match&) { ++softmaxes; });
    CHECK(softmaxes == 2);
}

namespace {
// cast(cast(x, wide), narrow) -> x when narrow is x's own dtype and the first
// cast widens exactly: a pure rewrite whose guard reads the class facts.
struct RoundTripCast {
    static constexpr std::string_view name = "round-trip-cast";
    using pattern = As<"narrow", Pat<sym(OpKind::Cast), As<"wide", Pat<sym(OpKind::Cast), Var<"x">>>>>;
    static bool exact_widening(DType from, DType to) {
        return (to == DType::F32 && (from == DType::F16 || from == DType::BF16)) || (to == DType::I64 && from == DType::I32);
    }
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec &narrow = ctx.spec(g, m.node<"narrow">()), &wide = ctx.spec(g, m.node<"wide">());
        const DType x = ctx.facts(g, m.var<"x">()).dtype;
        return narrow.dtype == x && exact_widening(x, wide.dtype) && reads_whole(narrow, 0) && reads_whole(wide, 0);
    }
    using rhs = Var<"x">;
};
}  // namespace

TEST_CASE("class facts: dtype, shape and constants as the classes were made") {
    Graph cx;
    auto x = cx.named_tensor("x", {3, 5}, DType::I32);
    auto y = (x.cast(DType::F16) * 2.0).output();
    HlirEGraph h;
    build_egraph(cx, h);
    const HlirContext& ctx = h.ctx;
    for (NodeId id = 0; id < cx.size(); ++id) {
        const Node& n = cx.node(id);
        ENodeId first = kNoChoice;
        for (ENodeId e = 0; e < h.graph.total_nodes() && first == kNoChoice; ++e)
            if (ctx.spec(h.graph, e).kind == n.op.symbol() && ctx.spec(h.graph, e).shape == n.shape &&
                ctx.spec(h.graph, e).dtype == n.dtype)
                first = e;
        REQUIRE(first != kNoChoice);
        const ClassFacts& f = ctx.facts(h.graph, h.graph.class_of(first));
        CHECK(f.dtype == n.dtype);
        CHECK(f.shape == n.shape);
        CHECK(f.constant.has_value() == (n.op.kind == OpKind::Constant));
        if (n.op.kind == OpKind::Constant) CHECK(*f.constant == 2.0);
    }
    (void)y;
}

TEST_CASE("a rule with named pieces, class facts and a right-hand side: exact round-trip casts vanish") {
    struct Case {
        DType stored, wide;
        bool vanishes;
    };
    for (Case c : {Case{DType::F16, DType::F32, true}, Case{DType::I32, DType::I64, true}, Case{DType::F32, DType::F16, false}}) {
        CAPTURE(name_of(c.stored));
        Graph cx;
        auto x = cx.named_tensor("x", {4}, c.stored);
        auto out = x.cast(c.wide).cast(c.stored).output();
        HlirEGraph h;
        build_egraph(cx, h);
        saturate(h.graph, h.ctx, RuleSet<RoundTripCast>{});
        const Program p = lower(h.graph, h.ctx, extract_min_cost(h.graph, h.ctx, costing_workloads({}, {}), CostModel{}, h.roots), h.roots);
        std::size_t casts = 0;
        for (const ProgramNode& n : p.nodes) casts += n.spec.kind == sym(OpKind::Cast);
        CHECK(casts == (c.vanishes ? 0 : 2));
        ReferenceRuntime rt;
        rt.load(p);
        rt.set_data(x, std::vector<float>{1, -2, 3, 70000});
        rt.execute(cx.dyn_map());
        // Hand-derived: 70000 is out of f16's range (inf), and stays so through f32 and back.
        const float big = c.stored == DType::F16 || c.wide == DType::F16 ? INFINITY : 70000.0f;
        CHECK(rt.get_f32(out) == std::vector<float>{1, -2, 3, big});
    }
}

TEST_CASE("a right-hand side keeps each child's view: commuting a broadcast add") {
    Graph cx;
    auto row = cx.named_tensor("row", {3}), grid = cx.named_tensor("grid", {2, 3});
    auto sum = (row + grid).output();  // row read through a broadcast view
    HlirEGraph h;
    build_egraph(cx, h);
    saturate(h.graph, h.ctx, RuleSet<Commutes<OpKind::Add>>{});
    std::size_t adds = 0;
    for (ENodeId n = 0; n < h.graph.total_nodes(); ++n) {
        if (!h.graph.alive(n) || h.ctx.spec(h.graph, n).kind != sym(OpKind::Add)) continue;
        ++adds;
        const NodeSpec& s = h.ctx.spec(h.graph, n);
        const auto kids = h.graph.children(n);
        // Whichever operand order, the row is the one read through the broadcast view.
        const bool row_first = h.graph.find(kids[0]) == h.graph.class_of(0);
        CHECK(s.views[row_first ? 0 : 1].is_broadcast(0));
        CHECK(!s.views[row_first ? 1 : 0].is_broadcast(0));
    }
    CHECK(adds == 2);
    (void)sum;
}

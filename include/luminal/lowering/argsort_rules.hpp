#pragma once
// Finds ops::argsort's rank count in the e-graph and stands Argsort
// (lowering/argsort.hpp) beside it. The composition ends in a Scatter of each
// position to its rank; under its index, a LessThan compares a row's values
// pairwise: the same class x on both sides, one side broadcast over the last
// axis and the other over the one before it. Dropping that broadcast axis
// gives the view argsort read x through; the rule records ops::argsort over
// x in that view again (both directions) and, where the e-graph holds that
// very composition, merges Argsort into the Scatter's class.
//
// A backend says which rows it sorts through `Accepts` (the CUDA kernel sorts
// a row in shared memory, so its rows have a bound).
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "luminal/egraph/composition.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/graph/ops_indexing.hpp"
#include "luminal/lowering/argsort.hpp"

namespace luminal::egraph {

namespace argsort_detail {

struct SortedRows {
    ClassId x;
    ShapeTracker view;  // x read as [..., n]
};

// The pairwise comparison under class `index`, searched breadth first a few levels down.
inline std::optional<SortedRows> compared_rows(const EGraph& g, const HlirContext& ctx, ClassId index) {
    constexpr std::size_t kMaxClasses = 256;
    std::vector<ClassId> seen{g.find(index)};
    std::deque<ClassId> queue{g.find(index)};
    while (!queue.empty() && seen.size() < kMaxClasses) {
        const ClassId c = queue.front();
        queue.pop_front();
        for (ENodeId n : g.class_nodes(c)) {
            if (!g.alive(n)) continue;
            const NodeSpec& s = ctx.spec(g, n);
            const auto kids = g.children(n);
            if (s.kind == sym(OpKind::LessThan) && g.find(kids[0]) == g.find(kids[1])) {
                const ShapeTracker &a = s.views[0], &b = s.views[1];
                const std::size_t r = a.rank();
                if (r >= 2 && b.rank() == r && !has_padding(a) && !has_padding(b)) {
                    if (a.is_broadcast(r - 1) && b.is_broadcast(r - 2)) return SortedRows{g.find(kids[0]), a.remove_broadcast_axis(r - 1)};
                    if (b.is_broadcast(r - 1) && a.is_broadcast(r - 2)) return SortedRows{g.find(kids[0]), b.remove_broadcast_axis(r - 1)};
                }
            }
            for (ClassId k : kids) {
                const ClassId kc = g.find(k);
                if (std::find(seen.begin(), seen.end(), kc) != seen.end()) continue;
                seen.push_back(kc);
                queue.push_back(kc);
            }
        }
    }
    return std::nullopt;
}

}  // namespace argsort_detail

// Every row: what the reference semantics and the CPU sort.
struct AnyRows {
    static bool accepts(DType, const Expression&) { return true; }
};

template <typename Accepts = AnyRows>
struct ArgsortFromRanks {
    static constexpr std::string_view name = "argsort-from-ranks";
    using pattern = As<"order", Pat<sym(OpKind::Scatter), Var<"dest">, Var<"index">, Var<"positions">>>;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec order = ctx.spec(g, m.node<"order">());
        if (order.dtype != DType::I32 || order.shape.empty()) return;
        const auto rows = argsort_detail::compared_rows(g, ctx, m.var<"index">());
        if (!rows || !(rows->view.dims() == order.shape)) return;
        const ClassFacts x = ctx.facts(g, rows->x);
        if (!Accepts::accepts(x.dtype, order.shape.back())) return;
        const ClassId root = m.root(g);
        for (bool descending : {true, false}) {
            Graph pattern;
            const GraphTensor in = pattern.tensor(x.shape, x.dtype);
            const GraphTensor sorted = ops::argsort(in.with_view(rows->view), -1, descending);
            const std::pair<NodeId, ClassId> leaves[] = {{in.id(), rows->x}};
            const auto found = find_composition(g, ctx, pattern, sorted.id(), leaves);
            if (!found || g.find(*found) != root) continue;
            NodeSpec spec = NodeSpec::backend(ArgsortOp{descending}, {rows->view}, order.shape, DType::I32);
            ClassId children[] = {rows->x};
            g.merge(root, add_spec(g, ctx, std::move(spec), children));
            return;
        }
    }
};

}  // namespace luminal::egraph

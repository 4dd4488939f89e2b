#pragma once
// Choosing one e-node per e-class and lowering the choice to a Program.
//  * cost model: bytes moved plus a per-kernel overhead, with arithmetic for
//    GEMMs; symbolic sizes are costed at their current value or a default;
//  * extract_min_cost: the cheapest tree per class (always acyclic);
//  * a Choice can also be edited by search; is_acyclic() checks it.
#include <cmath>
#include <limits>
#include <vector>

#include "luminal/egraph/hlir.hpp"

namespace luminal::egraph {

inline constexpr ENodeId kNoChoice = std::numeric_limits<ENodeId>::max();
using Choice = std::vector<ENodeId>;  // indexed by canonical class id

// Sizes for costing: dims set in the graph, else a typical size.
inline DynMap costing_dims(const DynMap& known, std::int64_t fallback = 256) {
    DynMap out;
    for (char c = 'a'; c <= 'z'; ++c) out.set(c, known.get(c).value_or(fallback));
    for (char c = 'A'; c <= 'Z'; ++c) out.set(c, known.get(c).value_or(fallback));
    return out;
}

inline double node_cost(const NodeSpec& s, const DynMap& dims) {
    constexpr double kernel_overhead = 4096;  // bytes-equivalent of launching one more kernel
    auto elements = [&](const Shape& shape) {
        double n = 1;
        for (auto& d : shape) n *= static_cast<double>(std::max<std::int64_t>(d.eval(dims), 0));
        return n;
    };
    if (s.kind == symbol_of(OpKind::Input) || s.kind == symbol_of(OpKind::Constant)) return 1;
    double bytes = elements(s.shape) * static_cast<double>(size_of(s.dtype));
    for (auto& v : s.views) bytes += elements(v.dims()) * 4;
    double cost = bytes + kernel_overhead;
    if (s.kind == symbol_of(BackendOp::Matmul)) {
        Shape a = s.views[0].dims();
        double flops = 2 * elements(s.shape) * static_cast<double>(a.back().eval(dims));
        cost += flops / 16;  // a GEMM does ~16 flops per byte-equivalent here
    }
    return cost;
}

inline Choice extract_min_cost(const EGraph& g, const HlirContext& ctx, const DynMap& dims) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cost(g.class_capacity(), inf);
    std::vector<double> own(g.total_nodes(), -1);
    Choice best(g.class_capacity(), kNoChoice);
    for (bool changed = true; changed;) {
        changed = false;
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            double total = own[n] < 0 ? (own[n] = node_cost(ctx.spec(g, n), dims)) : own[n];
            for (ClassId c : g.children(n)) total += cost[g.find(c)];
            ClassId c = g.class_of(n);
            if (total < cost[c]) {
                cost[c] = total;
                best[c] = n;
                changed = true;
            }
        }
    }
    return best;
}

// True when the chosen e-nodes reachable from roots form a DAG.
inline bool is_acyclic(const EGraph& g, const Choice& choice, const std::vector<ClassId>& roots) {
    enum : std::uint8_t { Unseen, Active, Done };
    std::vector<std::uint8_t> state(g.class_capacity(), Unseen);
    std::vector<std::pair<ClassId, std::size_t>> stack;
    for (ClassId root : roots) {
        ClassId r = g.find(root);
        if (state[r] == Done) continue;
        stack.push_back({r, 0});
        state[r] = Active;
        while (!stack.empty()) {
            auto& [c, next] = stack.back();
            ENodeId n = choice[c];
            if (n == kNoChoice) return false;
            auto kids = g.children(n);
            if (next == kids.size()) {
                state[c] = Done;
                stack.pop_back();
                continue;
            }
            ClassId k = g.find(kids[next++]);
            if (state[k] == Active) return false;
            if (state[k] == Unseen) {
                state[k] = Active;
                stack.push_back({k, 0});
            }
        }
    }
    return true;
}

// Classes reachable from roots through the choice, children before parents.
inline std::vector<ClassId> reachable_postorder(const EGraph& g, const Choice& choice, const std::vector<ClassId>& roots) {
    std::vector<std::uint8_t> seen(g.class_capacity(), 0);
    std::vector<ClassId> order;
    std::vector<std::pair<ClassId, std::size_t>> stack;
    for (ClassId root : roots) {
        ClassId r = g.find(root);
        if (seen[r]) continue;
        seen[r] = 1;
        stack.push_back({r, 0});
        while (!stack.empty()) {
            auto& [c, next] = stack.back();
            auto kids = g.children(choice[c]);
            if (next == kids.size()) {
                order.push_back(c);
                stack.pop_back();
                continue;
            }
            ClassId k = g.find(kids[next++]);
            if (!seen[k]) {
                seen[k] = 1;
                stack.push_back({k, 0});
            }
        }
    }
    return order;
}

// Lowers an acyclic choice to a program in a deterministic execution order.
inline Program lower(const EGraph& g, const HlirContext& ctx, const Choice& choice, const std::vector<ClassId>& roots) {
    Program p;
    std::vector<std::uint32_t> index(g.class_capacity(), 0);
    for (ClassId c : reachable_postorder(g, choice, roots)) {
        ProgramNode node{ctx.spec(g, choice[c]), {}};
        for (ClassId k : g.children(choice[c])) node.sources.push_back(index[g.find(k)]);
        index[c] = static_cast<std::uint32_t>(p.nodes.size());
        p.nodes.push_back(std::move(node));
    }
    return p;
}

}  // namespace luminal::egraph

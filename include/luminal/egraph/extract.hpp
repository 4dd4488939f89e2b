#pragma once
// Choosing one e-node per e-class and lowering the choice to a Program.
//  * cost: the runtime's CostModel (egraph/cost_model.hpp) over the
//    compilation's workloads, weighted;
//  * extract_min_cost: the cheapest choice per class, shared subgraphs
//    amortised over their users (always acyclic);
//  * a Choice can also be edited by search; is_acyclic() checks it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/egraph/hlir.hpp"

namespace luminal::egraph {

inline constexpr ENodeId kNoChoice = std::numeric_limits<ENodeId>::max();
using Choice = std::vector<ENodeId>;  // indexed by canonical class id

// The cheapest e-node per class by amortised cost: a class used by u parent
// classes passes 1/u of its cost to each. (Summed tree costs count a shared
// subgraph once per path to it, which grows exponentially with depth, since a
// residual stream is read by every layer, until the differences between
// alternatives vanish below double precision.) Amortised costs can favour a
// node that leads back to its own class, so the choice is then made top-down,
// each class taking its cheapest node that does not reach a class whose choice
// is still open above it: the result is always acyclic.
inline Choice extract_min_cost(const EGraph& g, const HlirContext& ctx, const std::vector<Workload>& workloads,
                               const CostModel& model) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<DType> class_dtype(g.class_capacity(), DType::F32);
    for (ENodeId n = 0; n < g.total_nodes(); ++n)
        if (g.alive(n)) class_dtype[g.class_of(n)] = ctx.spec(g, n).dtype;
    auto own_cost = [&](ENodeId n) {
        std::vector<DType> inputs;
        for (ClassId c : g.children(n)) inputs.push_back(class_dtype[g.find(c)]);
        double seconds = 0;
        for (const Workload& w : workloads) seconds += w.weight * node_seconds(ctx.spec(g, n), inputs, w.dims, model);
        return seconds;
    };
    std::vector<double> uses(g.class_capacity(), 0);
    {
        std::vector<std::uint64_t> edges;
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            const std::uint64_t parent = g.class_of(n);
            for (ClassId c : g.children(n)) edges.push_back(parent << 32 | g.find(c));
        }
        std::sort(edges.begin(), edges.end());
        edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
        for (std::uint64_t e : edges) uses[static_cast<ClassId>(e & 0xffffffffu)] += 1;
    }
    std::vector<double> cost(g.class_capacity(), inf);
    std::vector<double> own(g.total_nodes(), -1), total(g.total_nodes(), inf);
    for (bool changed = true; changed;) {
        changed = false;
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            double t = own[n] < 0 ? (own[n] = own_cost(n)) : own[n];
            for (ClassId c : g.children(n)) {
                const ClassId child = g.find(c);
                t += cost[child] / std::max(uses[child], 1.0);
            }
            total[n] = t;
            if (t < cost[g.class_of(n)]) {
                cost[g.class_of(n)] = t;
                changed = true;
            }
        }
    }

    enum : std::uint8_t { Open, Active, Done };
    std::vector<std::uint8_t> state(g.class_capacity(), Open);
    Choice best(g.class_capacity(), kNoChoice);
    struct Frame {
        ClassId cls;
        std::size_t next_child = 0;
    };
    std::vector<Frame> stack;
    std::vector<ENodeId> order;
    auto open = [&](ClassId c) {
        state[c] = Active;
        order.assign(g.class_nodes(c).begin(), g.class_nodes(c).end());
        std::stable_sort(order.begin(), order.end(), [&](ENodeId a, ENodeId b) { return total[a] < total[b]; });
        for (ENodeId n : order) {
            if (!g.alive(n) || total[n] == inf) continue;
            const auto kids = g.children(n);
            if (std::none_of(kids.begin(), kids.end(), [&](ClassId k) { return state[g.find(k)] == Active; })) {
                best[c] = n;
                break;
            }
        }
        check(best[c] != kNoChoice, "extract", "class {} has no e-node that avoids a cycle", c);
        stack.push_back({c});
    };
    for (ClassId root = 0; root < g.class_capacity(); ++root) {
        if (g.find(root) != root || state[root] != Open || g.class_nodes(root).empty()) continue;
        open(root);
        while (!stack.empty()) {
            Frame& top = stack.back();
            const auto kids = g.children(best[top.cls]);
            if (top.next_child < kids.size()) {
                const ClassId child = g.find(kids[top.next_child++]);
                if (state[child] == Open) open(child);
            } else {
                state[top.cls] = Done;
                stack.pop_back();
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

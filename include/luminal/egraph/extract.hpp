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
#include <optional>
#include <vector>

#include "luminal/egraph/extraction_graph.hpp"

namespace luminal::egraph {

inline constexpr ENodeId kNoChoice = std::numeric_limits<ENodeId>::max();
using Choice = std::vector<ENodeId>;  // indexed by canonical class id

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


namespace extract_detail {

// The cheapest e-node per class by amortised cost: a class used by u parents
// passes 1/u of its cost to each. Amortised costs can favour a node that
// leads back to its own class, so the choice is then made top-down, each
// class taking its cheapest node that does not reach a class whose choice is
// still open above it: the result is always acyclic.
//
// A class's cost is lowered to a node's price (its own cost plus its
// children's shares) until no node lowers it: the greatest such fixed point,
// which any order of lowering reaches, as every step is monotone in the
// shares. So the classes settle a strongly connected group at a time, readers
// after what they read, and only a cyclic group is swept until it settles
// (re-pricing just the nodes whose children's costs changed).
inline Choice choose(const EGraph& g, const ExtractionGraph& extraction, const std::vector<double>& own, const std::vector<double>& uses) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cost(g.class_capacity(), inf);
    std::vector<double> share(g.class_capacity(), inf);  // cost / max(uses, 1): what each reader is charged
    std::vector<double> total(g.total_nodes(), inf);
    std::vector<std::uint8_t> stale(g.total_nodes(), 0);
    auto price = [&](ENodeId n) {
        double t = own[n];
        for (ClassId child : extraction.children(n)) t += share[child];
        total[n] = t;
        const ClassId cls = extraction.class_of(n);
        if (!(t < cost[cls])) return false;
        cost[cls] = t;
        share[cls] = t / std::max(uses[cls], 1.0);
        return true;
    };
    for (std::size_t k = 0; k < extraction.groups(); ++k) {
        const std::span<const ENodeId> nodes = extraction.group(k);
        if (!extraction.cyclic(k)) {
            for (ENodeId n : nodes) price(n);
            continue;
        }
        for (ENodeId n : nodes) stale[n] = 1;
        for (bool changed = true; changed;) {
            changed = false;
            for (ENodeId n : nodes) {
                if (!stale[n]) continue;
                stale[n] = 0;
                if (!price(n)) continue;
                changed = true;
                for (ENodeId r : extraction.readers(extraction.class_of(n)))
                    if (extraction.group_of(extraction.class_of(r)) == k) stale[r] = 1;
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

// How many chosen edges (and roots) reach each class of an acyclic choice: a
// class is in the program while its count is positive. Re-picking one class
// changes the counts of the classes below it only, so the program's summed
// cost after a re-pick follows from those classes alone (see cost_after).
class ChoiceReferences {
public:
    ChoiceReferences(const EGraph& g, const std::vector<double>& own, const std::vector<ClassId>& roots)
        : g_(g), own_(own), roots_(roots) {}

    void count(const Choice& choice) {
        refs_.assign(g_.class_capacity(), 0);
        for (ClassId root : roots_) refs_[g_.find(root)] += 1;
        for (ClassId c : reachable_postorder(g_, choice, roots_))
            for (ClassId k : g_.children(choice[c])) refs_[g_.find(k)] += 1;
    }

    bool reached(ClassId c) const { return refs_[c] > 0; }

    // The summed cost of `choice` with class c re-picked to node n, given the
    // summed cost of `choice` itself (c reached, the choice acyclic). Classes
    // the new node reads that were out of the program come in with everything
    // they newly reach; classes only the old node kept reachable drop out.
    // Nullopt where the re-pick reaches a class without a choice (it can only
    // be rejected). A re-pick that closes a cycle gets a meaningless estimate:
    // the caller's acyclicity check rejects it.
    std::optional<double> cost_after(const Choice& choice, double total, ClassId c, ENodeId n) {
        double added = own_[n] - own_[choice[c]];
        double dropped = 0;
        bool unchosen = false;
        for (ClassId k : g_.children(n)) stack_.push_back(g_.find(k));
        while (!stack_.empty()) {
            const ClassId k = stack_.back();
            stack_.pop_back();
            log_.push_back({k, refs_[k]});
            if (refs_[k]++ > 0) continue;
            if (choice[k] == kNoChoice) {
                unchosen = true;
                continue;
            }
            added += own_[choice[k]];
            for (ClassId kk : g_.children(choice[k])) stack_.push_back(g_.find(kk));
        }
        for (ClassId k : g_.children(choice[c])) stack_.push_back(g_.find(k));
        while (!stack_.empty()) {
            const ClassId k = stack_.back();
            stack_.pop_back();
            log_.push_back({k, refs_[k]});
            if (--refs_[k] > 0) continue;
            dropped += own_[choice[k]];
            for (ClassId kk : g_.children(choice[k])) stack_.push_back(g_.find(kk));
        }
        for (auto it = log_.rbegin(); it != log_.rend(); ++it) refs_[it->first] = it->second;
        log_.clear();
        if (unchosen) return std::nullopt;
        return total + added - dropped;
    }

private:
    const EGraph& g_;
    const std::vector<double>& own_;
    const std::vector<ClassId>& roots_;
    std::vector<std::int64_t> refs_;
    std::vector<ClassId> stack_;
    std::vector<std::pair<ClassId, std::int64_t>> log_;
};

// Re-picks one class at a time (parents first) wherever another of its nodes
// lowers the program's summed cost and keeps it acyclic, until no pick does:
// a fused node that replaces a chain of classes wins once the chain's classes
// drop out of the program. Each re-pick is first priced from the classes it
// changes (ChoiceReferences); only one that this estimate shows lowering the
// cost is checked for cycles and summed over the whole program, which decides.
inline Choice improve_locally(const EGraph& g, const std::vector<double>& own, const std::vector<ClassId>& roots, Choice best,
                              double best_total) {
    auto total_of = [&](const Choice& c) {
        double t = 0;
        for (ClassId k : reachable_postorder(g, c, roots)) t += own[c[k]];
        return t;
    };
    // The decisive comparison below accepts a re-pick saving more than 1e-12
    // of the total; an estimate (a sum in another order) that saves less than
    // 1e-13 cannot be one, whatever its rounding.
    constexpr double kTolerance = 1e-12, kEstimateSlack = 1e-13;
    ChoiceReferences references(g, own, roots);
    references.count(best);
    constexpr int kPasses = 4;
    for (int pass = 0; pass < kPasses; ++pass) {
        bool improved = false;
        std::vector<ClassId> order = reachable_postorder(g, best, roots);
        std::reverse(order.begin(), order.end());
        for (ClassId c : order) {
            for (ENodeId n : g.class_nodes(c)) {
                if (!g.alive(n) || n == best[c] || !references.reached(c)) continue;
                const std::optional<double> estimate = references.cost_after(best, best_total, c, n);
                if (!estimate || *estimate >= best_total * (1 - kTolerance + kEstimateSlack)) continue;
                Choice trial = best;
                trial[c] = n;
                if (!is_acyclic(g, trial, roots)) continue;
                const double t = total_of(trial);
                if (t < best_total * (1 - kTolerance)) {
                    best = std::move(trial);
                    best_total = t;
                    improved = true;
                    references.count(best);
                }
            }
        }
        if (!improved) break;
    }
    return best;
}

}  // namespace extract_detail

// The cheapest program for `roots`. Amortised costs split a shared class's
// cost among its parents (summed tree costs would count a shared subgraph
// once per path to it, which grows exponentially with depth, since a residual
// stream is read by every layer). Counting every parent class overstates
// sharing, though: a class read by alternatives that are never chosen looks
// cheap to each real reader, and a fused node that replaces such a class
// looks dear. So the choice is refined: each class's share is recounted from
// the chosen program's own readers of it, and the program whose summed cost
// (each chosen node once) is least wins, and is then improved one class at a time.
inline Choice extract_min_cost(const EGraph& g, const ExtractionGraph& extraction, const std::vector<double>& own,
                               const std::vector<ClassId>& roots) {
    constexpr int kRefinements = 6;
    std::vector<double> uses = extraction.parent_classes();
    Choice best;
    double best_total = std::numeric_limits<double>::infinity();
    for (int round = 0; round < kRefinements; ++round) {
        Choice choice = extract_detail::choose(g, extraction, own, uses);
        const std::vector<ClassId> reached = reachable_postorder(g, choice, roots);
        double total = 0;
        std::vector<double> readers(g.class_capacity(), 0);
        for (ClassId c : reached) {
            total += own[choice[c]];
            for (ClassId k : g.children(choice[c])) readers[g.find(k)] += 1;
        }
        if (total < best_total) {
            best_total = total;
            best = std::move(choice);
        }
        for (double& r : readers) r = std::max(r, 1.0);
        if (readers == uses) break;
        uses = std::move(readers);
    }
    return extract_detail::improve_locally(g, own, roots, std::move(best), best_total);
}

// The same, pricing the e-graph's nodes at `workloads` under `model`.
inline Choice extract_min_cost(const EGraph& g, const HlirContext& ctx, const std::vector<Workload>& workloads,
                               const CostModel& model, const std::vector<ClassId>& roots) {
    const ExtractionGraph extraction(g, ctx);
    return extract_min_cost(g, extraction, extraction.prices(workloads, model), roots);
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

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
#include <span>
#include <vector>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/egraph/hlir.hpp"

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

// The live e-nodes' classes and canonical children, and the live e-nodes that
// read each class, in flat arrays: extraction walks them many times.
class NodeLinks {
public:
    explicit NodeLinks(const EGraph& g)
        : node_class_(g.total_nodes(), 0), child_start_(g.total_nodes() + 1, 0), reader_start_(g.class_capacity() + 1, 0) {
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (g.alive(n)) {
                node_class_[n] = g.class_of(n);
                for (ClassId c : g.children(n)) {
                    children_.push_back(g.find(c));
                    ++reader_start_[children_.back() + 1];
                }
            }
            child_start_[n + 1] = children_.size();
        }
        for (std::size_t c = 1; c < reader_start_.size(); ++c) reader_start_[c] += reader_start_[c - 1];
        readers_.resize(reader_start_.back());
        std::vector<std::size_t> next(reader_start_.begin(), reader_start_.end() - 1);
        for (ENodeId n = 0; n < g.total_nodes(); ++n)
            for (ClassId c : children(n)) readers_[next[c]++] = n;
        group_classes(g);
    }

    ClassId class_of(ENodeId n) const { return node_class_[n]; }
    std::span<const ClassId> children(ENodeId n) const {
        return {children_.data() + child_start_[n], children_.data() + child_start_[n + 1]};
    }
    std::span<const ENodeId> readers(ClassId c) const {
        return {readers_.data() + reader_start_[c], readers_.data() + reader_start_[c + 1]};
    }

    // The live nodes grouped by strongly connected classes (each class of a
    // group reaches every other through some nodes' children), a group after
    // every group it reads; cyclic(k): whether group k reads itself.
    std::size_t groups() const { return group_start_.size() - 1; }
    std::span<const ENodeId> group(std::size_t k) const {
        return {group_nodes_.data() + group_start_[k], group_nodes_.data() + group_start_[k + 1]};
    }
    bool cyclic(std::size_t k) const { return group_cyclic_[k]; }
    std::size_t group_of(ClassId c) const { return class_group_[c]; }

private:
    // Tarjan's algorithm over the classes, iteratively: it completes a group
    // only after every group reachable from it, which is the order wanted.
    void group_classes(const EGraph& g) {
        constexpr std::uint32_t unvisited = std::numeric_limits<std::uint32_t>::max();
        const std::size_t classes = g.class_capacity();
        std::vector<std::uint32_t> index(classes, unvisited), low(classes, 0);
        std::vector<std::uint8_t> on_stack(classes, 0);
        std::vector<ClassId> pending;
        class_group_.assign(classes, 0);
        group_start_.assign(1, 0);
        struct Frame {
            ClassId cls;
            std::size_t node = 0, child = 0;  // the next edge: the child-th child of the node-th node
        };
        std::vector<Frame> frames;
        std::uint32_t next_index = 0;
        auto visit = [&](ClassId c) {
            index[c] = low[c] = next_index++;
            pending.push_back(c);
            on_stack[c] = 1;
            frames.push_back({c});
        };
        for (ClassId root = 0; root < classes; ++root) {
            if (g.find(root) != root || index[root] != unvisited) continue;
            visit(root);
            while (!frames.empty()) {
                Frame& f = frames.back();
                const auto nodes = g.class_nodes(f.cls);
                if (f.node < nodes.size()) {
                    const auto kids = g.alive(nodes[f.node]) ? children(nodes[f.node]) : std::span<const ClassId>{};
                    if (f.child == kids.size()) {
                        ++f.node;
                        f.child = 0;
                        continue;
                    }
                    const ClassId k = kids[f.child++];
                    if (index[k] == unvisited) visit(k);
                    else if (on_stack[k]) low[f.cls] = std::min(low[f.cls], index[k]);
                    continue;
                }
                const ClassId c = f.cls;
                frames.pop_back();
                if (!frames.empty()) low[frames.back().cls] = std::min(low[frames.back().cls], low[c]);
                if (low[c] != index[c]) continue;
                const std::size_t group = group_start_.size() - 1;
                const std::size_t first = group_nodes_.size();
                ClassId member;
                do {
                    member = pending.back();
                    pending.pop_back();
                    on_stack[member] = 0;
                    class_group_[member] = group;
                    for (ENodeId n : g.class_nodes(member))
                        if (g.alive(n)) group_nodes_.push_back(n);
                } while (member != c);
                std::sort(group_nodes_.begin() + static_cast<std::ptrdiff_t>(first), group_nodes_.end());
                bool reads_itself = false;
                for (std::size_t i = first; i < group_nodes_.size(); ++i)
                    for (ClassId k : children(group_nodes_[i])) reads_itself |= class_group_[k] == group;
                group_start_.push_back(group_nodes_.size());
                group_cyclic_.push_back(reads_itself);
            }
        }
    }

    std::vector<ClassId> node_class_;
    std::vector<std::size_t> child_start_;
    std::vector<ClassId> children_;
    std::vector<std::size_t> reader_start_;
    std::vector<ENodeId> readers_;
    std::vector<std::size_t> class_group_;
    std::vector<std::size_t> group_start_;
    std::vector<ENodeId> group_nodes_;
    std::vector<std::uint8_t> group_cyclic_;
};

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
inline Choice choose(const EGraph& g, const NodeLinks& links, const std::vector<double>& own, const std::vector<double>& uses) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cost(g.class_capacity(), inf);
    std::vector<double> share(g.class_capacity(), inf);  // cost / max(uses, 1): what each reader is charged
    std::vector<double> total(g.total_nodes(), inf);
    std::vector<std::uint8_t> stale(g.total_nodes(), 0);
    auto price = [&](ENodeId n) {
        double t = own[n];
        for (ClassId child : links.children(n)) t += share[child];
        total[n] = t;
        const ClassId cls = links.class_of(n);
        if (!(t < cost[cls])) return false;
        cost[cls] = t;
        share[cls] = t / std::max(uses[cls], 1.0);
        return true;
    };
    for (std::size_t k = 0; k < links.groups(); ++k) {
        const std::span<const ENodeId> nodes = links.group(k);
        if (!links.cyclic(k)) {
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
                for (ENodeId r : links.readers(links.class_of(n)))
                    if (links.group_of(links.class_of(r)) == k) stale[r] = 1;
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

// Parent classes of each class: every class whose e-nodes read it.
inline std::vector<double> parent_classes(const EGraph& g) {
    std::vector<double> uses(g.class_capacity(), 0);
    std::vector<std::uint64_t> edges;
    for (ENodeId n = 0; n < g.total_nodes(); ++n) {
        if (!g.alive(n)) continue;
        const std::uint64_t parent = g.class_of(n);
        for (ClassId c : g.children(n)) edges.push_back(parent << 32 | g.find(c));
    }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    for (std::uint64_t e : edges) uses[static_cast<ClassId>(e & 0xffffffffu)] += 1;
    return uses;
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
inline Choice extract_min_cost(const EGraph& g, const HlirContext& ctx, const std::vector<Workload>& workloads,
                               const CostModel& model, const std::vector<ClassId>& roots) {
    std::vector<DType> class_dtype(g.class_capacity(), DType::F32);
    std::vector<std::uint8_t> class_bound(g.class_capacity(), 0);  // holds an Input or Constant
    for (ENodeId n = 0; n < g.total_nodes(); ++n) {
        if (!g.alive(n)) continue;
        const NodeSpec& spec = ctx.spec(g, n);
        class_dtype[g.class_of(n)] = spec.dtype;
        if (spec.kind == symbol_of(OpKind::Input) || spec.kind == symbol_of(OpKind::Constant)) class_bound[g.class_of(n)] = 1;
    }
    std::vector<double> own(g.total_nodes(), 0);
    for (ENodeId n = 0; n < g.total_nodes(); ++n) {
        if (!g.alive(n)) continue;
        std::vector<DType> inputs;
        std::vector<Shape> shapes;
        std::vector<std::uint8_t> bound;
        for (ClassId c : g.children(n)) {
            inputs.push_back(class_dtype[g.find(c)]);
            shapes.push_back(ctx.facts(g, c).shape);
            bound.push_back(class_bound[g.find(c)]);
        }
        for (const Workload& w : workloads)
            own[n] += w.weight * node_seconds(NodeCostQuery{ctx.spec(g, n), inputs, shapes, bound, w.dims}, model);
    }
    constexpr int kRefinements = 6;
    std::vector<double> uses = extract_detail::parent_classes(g);
    const extract_detail::NodeLinks links(g);
    Choice best;
    double best_total = std::numeric_limits<double>::infinity();
    for (int round = 0; round < kRefinements; ++round) {
        Choice choice = extract_detail::choose(g, links, own, uses);
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

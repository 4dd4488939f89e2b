#pragma once
// The saturated e-graph as extraction reads it (see ExtractionGraph).
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/egraph/hlir.hpp"

namespace luminal::egraph {

// What extraction reads of a saturated e-graph, gathered once for every set
// of workloads priced on it (the main program's and each specialization's):
// the live e-nodes' classes and canonical children, the live e-nodes that read
// each class, the classes' strongly connected groups, how many parent classes
// read each class, and what the cost model needs of each node's inputs.
class ExtractionGraph {
public:
    ExtractionGraph(const EGraph& g, const HlirContext& ctx)
        : g_(g), ctx_(ctx), node_class_(g.total_nodes(), 0), child_start_(g.total_nodes() + 1, 0),
          reader_start_(g.class_capacity() + 1, 0) {
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
        count_parent_classes(g);
        gather_inputs(g, ctx);
    }

    // Parent classes of each class: every class whose e-nodes read it.
    const std::vector<double>& parent_classes() const { return parent_classes_; }

    // Each live node's seconds under `model` for each set of workloads (the
    // main program's, each specialization's), summed over the set's workloads
    // by weight. A price depends only on the node's spec and its inputs'
    // facts, so it is found once per group of nodes that share them (a layer's
    // nodes repeat in every layer), at every workload of every set in one
    // call: a runtime plans the node's kernel once for all of them.
    std::vector<std::vector<double>> prices(const std::vector<std::vector<Workload>>& sets, const CostModel& model) const {
        std::vector<DynMap> dims;
        for (const std::vector<Workload>& set : sets)
            for (const Workload& w : set) dims.push_back(w.dims);
        static const DynMap no_dims;
        const DynMap& first_dims = dims.empty() ? no_dims : dims[0];
        std::vector<double> seconds(priced_by_.size() * dims.size(), 0);
        for (std::size_t k = 0; k < priced_by_.size(); ++k) {
            const ENodeId n = priced_by_[k];
            const std::size_t first = child_start_[n], count = child_start_[n + 1] - first;
            const std::span<double> at(seconds.data() + k * dims.size(), dims.size());
            const NodeCostQuery query{ctx_.spec(g_, n), std::span(input_dtypes_).subspan(first, count),
                                      std::span(input_shapes_).subspan(first, count), std::span(input_bound_).subspan(first, count),
                                      first_dims};
            if (model.price) model.price(query, dims, at);
            else
                for (std::size_t d = 0; d < dims.size(); ++d)
                    at[d] = node_seconds(NodeCostQuery{query.spec, query.input_dtypes, query.input_shapes, query.input_bound, dims[d]},
                                         model);
        }
        std::vector<std::vector<double>> own(sets.size(), std::vector<double>(g_.total_nodes(), 0));
        std::size_t d = 0;
        for (std::size_t s = 0; s < sets.size(); ++s)
            for (const Workload& w : sets[s]) {
                for (ENodeId n = 0; n < g_.total_nodes(); ++n)
                    if (g_.alive(n)) own[s][n] += w.weight * seconds[price_group_[n] * dims.size() + d];
                ++d;
            }
        return own;
    }

    // The same for one set of workloads.
    std::vector<double> prices(const std::vector<Workload>& workloads, const CostModel& model) const {
        return std::move(prices(std::vector<std::vector<Workload>>{workloads}, model)[0]);
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
    void count_parent_classes(const EGraph& g) {
        parent_classes_.assign(g.class_capacity(), 0);
        std::vector<std::uint64_t> edges;
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            const std::uint64_t parent = class_of(n);
            for (ClassId c : children(n)) edges.push_back(parent << 32 | c);
        }
        std::sort(edges.begin(), edges.end());
        edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
        for (std::uint64_t e : edges) parent_classes_[static_cast<ClassId>(e & 0xffffffffu)] += 1;
    }

    // Per child slot (as children_): the dtype of the class read, its shape,
    // and whether it holds bound data (an Input or Constant).
    void gather_inputs(const EGraph& g, const HlirContext& ctx) {
        std::vector<DType> class_dtype(g.class_capacity(), DType::F32);
        std::vector<std::uint8_t> class_bound(g.class_capacity(), 0);
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            const NodeSpec& spec = ctx.spec(g, n);
            class_dtype[class_of(n)] = spec.dtype;
            if (spec.kind == symbol_of(OpKind::Input) || spec.kind == symbol_of(OpKind::Constant)) class_bound[class_of(n)] = 1;
        }
        input_dtypes_.reserve(children_.size());
        input_shapes_.reserve(children_.size());
        input_bound_.reserve(children_.size());
        for (ClassId c : children_) {
            input_dtypes_.push_back(class_dtype[c]);
            input_shapes_.push_back(ctx.facts(g, c).shape);
            input_bound_.push_back(class_bound[c]);
        }
        // Nodes priced alike: the same spec (attribute) and, per input, the same
        // dtype, bound flag and shape (interned expressions compare by identity).
        absl::flat_hash_map<std::vector<std::uintptr_t>, std::uint32_t> groups;
        price_group_.assign(g.total_nodes(), 0);
        std::vector<std::uintptr_t> key;
        for (ENodeId n = 0; n < g.total_nodes(); ++n) {
            if (!g.alive(n)) continue;
            key.assign({g.node(n).attr});
            for (std::size_t i = child_start_[n]; i < child_start_[n + 1]; ++i) {
                key.push_back(static_cast<std::uintptr_t>(input_dtypes_[i]) << 8 | input_bound_[i]);
                key.push_back(input_shapes_[i].size());
                for (const Expression& e : input_shapes_[i]) key.push_back(reinterpret_cast<std::uintptr_t>(e.node()));
            }
            const auto [it, added] = groups.try_emplace(key, static_cast<std::uint32_t>(priced_by_.size()));
            if (added) priced_by_.push_back(n);
            price_group_[n] = it->second;
        }
    }

    // Tarjan's algorithm over the classes, iteratively: it completes a group
    // only after every group reachable from it, which is the order wanted.
    void group_classes(const EGraph& g) {
        constexpr std::uint32_t unvisited = std::numeric_limits<std::uint32_t>::max();
        const std::size_t classes = g.class_capacity();
        struct Visit {
            std::uint32_t index = unvisited, low = 0;
            bool on_stack = false;
        };
        std::vector<Visit> visits(classes);
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
            visits[c].index = visits[c].low = next_index++;
            pending.push_back(c);
            visits[c].on_stack = true;
            frames.push_back({c});
        };
        for (ClassId root = 0; root < classes; ++root) {
            if (g.find(root) != root || visits[root].index != unvisited) continue;
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
                    if (visits[k].index == unvisited) visit(k);
                    else if (visits[k].on_stack) visits[f.cls].low = std::min(visits[f.cls].low, visits[k].index);
                    continue;
                }
                const ClassId c = f.cls;
                frames.pop_back();
                if (!frames.empty()) visits[frames.back().cls].low = std::min(visits[frames.back().cls].low, visits[c].low);
                if (visits[c].low != visits[c].index) continue;
                const std::size_t group = group_start_.size() - 1;
                const std::size_t first = group_nodes_.size();
                ClassId member;
                do {
                    member = pending.back();
                    pending.pop_back();
                    visits[member].on_stack = false;
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

    const EGraph& g_;
    const HlirContext& ctx_;
    std::vector<ClassId> node_class_;
    std::vector<std::size_t> child_start_;
    std::vector<ClassId> children_;
    std::vector<std::size_t> reader_start_;
    std::vector<ENodeId> readers_;
    std::vector<std::size_t> class_group_;
    std::vector<std::size_t> group_start_;
    std::vector<ENodeId> group_nodes_;
    std::vector<std::uint8_t> group_cyclic_;
    std::vector<double> parent_classes_;
    std::vector<DType> input_dtypes_;
    std::vector<Shape> input_shapes_;
    std::vector<std::uint8_t> input_bound_;
    std::vector<std::uint32_t> price_group_;  // per live node: its index in priced_by_
    std::vector<ENodeId> priced_by_;          // per group of nodes priced alike: the node priced for all
};

}  // namespace luminal::egraph

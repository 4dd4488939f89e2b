#pragma once
// The HLIR/LLIR language on the e-graph: an e-node's attribute is an interned
// NodeSpec (op, views of its inputs, shape, dtype, backend payload) and its
// children are the classes of its inputs. Building starts with one class per
// HLIR node; Input and Output nodes carry their HLIR id, so they never merge
// with each other, while identical pure nodes (two equal constants) share a class.
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/graph/graph.hpp"
#include "luminal/graph/program.hpp"

namespace luminal::egraph {

class SpecTable {
public:
    SpecTable() : index_(0, Hash{this}, Eq{this}) {}
    SpecTable(const SpecTable&) = delete;
    SpecTable& operator=(const SpecTable&) = delete;

    AttrId intern(NodeSpec spec) {
        specs_.push_back(std::move(spec));
        auto id = static_cast<AttrId>(specs_.size() - 1);
        if (auto it = index_.find(id); it != index_.end()) {
            specs_.pop_back();
            return *it;
        }
        index_.insert(id);
        return id;
    }
    // The id of a spec equal to `spec` interned before, without interning it.
    std::optional<AttrId> find(const NodeSpec& spec) {
        specs_.push_back(spec);
        const auto probe = static_cast<AttrId>(specs_.size() - 1);
        auto it = index_.find(probe);
        specs_.pop_back();
        if (it == index_.end()) return std::nullopt;
        return *it;
    }
    const NodeSpec& operator[](AttrId id) const { return specs_[id]; }
    std::size_t size() const { return specs_.size(); }

private:
    struct Hash {
        const SpecTable* t;
        std::size_t operator()(AttrId id) const { return t->specs_[id].hash(); }
    };
    struct Eq {
        const SpecTable* t;
        bool operator()(AttrId a, AttrId b) const { return t->specs_[a] == t->specs_[b]; }
    };
    std::vector<NodeSpec> specs_;
    absl::flat_hash_set<AttrId, Hash, Eq> index_;
};

// What every e-node of a class agrees on (an e-class analysis): the dtype
// and shape of its value, and, for a class made as a scalar Constant, the
// constant. Recorded when the class is made; a merge keeps the surviving
// class's facts, which agree with the other's but for the constant a class
// may have gained later (so a missing constant means "not known").
struct ClassFacts {
    DType dtype = DType::F32;
    Shape shape;
    std::optional<double> constant;
    // The longest chain of e-nodes below the one that made the class: a value
    // computed from another class's is made deeper than it.
    std::uint32_t depth = 0;
};

// The context rules receive: the spec table, to read and create attributes,
// and the class facts.
class HlirContext {
public:
    SpecTable specs;
    const NodeSpec& spec(const EGraph& g, ENodeId node) const { return specs[g.node(node).attr]; }
    const ClassFacts& facts(const EGraph& g, ClassId c) const { return facts_[g.find(c)]; }

    void note_class(ClassId c, const NodeSpec& spec, std::uint32_t depth) {
        if (c < facts_.size()) return;
        facts_.resize(c + 1);
        ClassFacts& f = facts_[c];
        f.depth = depth;
        f.dtype = spec.dtype;
        f.shape = spec.shape;
        if (spec.kind == symbol_of(OpKind::Constant) && spec.shape.empty()) f.constant = spec.op.value;
    }

    // For a rule whose apply is a function of what it reads (canonical
    // classes, e-nodes): true when it applied at `node` before and read
    // exactly `reads` then, so it would add nothing new; records `reads` otherwise.
    bool read_before(std::string_view rule, ENodeId node, std::vector<std::uint32_t> reads) {
        std::vector<std::uint32_t>& last = last_reads_[rule][node];
        if (last == reads) return true;
        last = std::move(reads);
        return false;
    }
    // What the rule recorded at `node` last (empty: nothing); valid until its next read_before there.
    std::span<const std::uint32_t> last_read(std::string_view rule, ENodeId node) const {
        const auto r = last_reads_.find(rule);
        if (r == last_reads_.end()) return {};
        const auto n = r->second.find(node);
        return n == r->second.end() ? std::span<const std::uint32_t>{} : std::span<const std::uint32_t>(n->second);
    }

private:
    std::vector<ClassFacts> facts_;  // by class id, as made
    std::map<std::string_view, absl::flat_hash_map<ENodeId, std::vector<std::uint32_t>>> last_reads_;
};

inline ClassId add_node(EGraph& g, HlirContext& ctx, NodeSpec spec, std::span<const ClassId> children) {
    const std::uint16_t kind = spec.kind;
    std::uint32_t depth = 0;
    for (ClassId child : children) depth = std::max(depth, ctx.facts(g, child).depth + 1);
    const AttrId attr = ctx.specs.intern(std::move(spec));
    const ClassId c = g.add(kind, attr, children);
    ctx.note_class(c, ctx.specs[attr], depth);
    return c;
}

struct HlirEGraph {
    EGraph graph;
    HlirContext ctx;
    std::vector<ClassId> roots;  // every Output, then every Input (so unused inputs stay bindable)
};

inline void build_egraph(const Graph& source, HlirEGraph& out) {
    Program program = program_of(source);
    std::vector<ClassId> classes(program.nodes.size());
    std::vector<ClassId> inputs;
    for (std::uint32_t i = 0; i < program.nodes.size(); ++i) {
        std::vector<ClassId> children;
        for (std::uint32_t s : program.nodes[i].sources) children.push_back(classes[s]);
        classes[i] = add_node(out.graph, out.ctx, program.nodes[i].spec, children);
        if (program.nodes[i].spec.kind == symbol_of(OpKind::Input)) inputs.push_back(classes[i]);
    }
    for (NodeId o : source.outputs()) out.roots.push_back(classes[o]);
    out.roots.insert(out.roots.end(), inputs.begin(), inputs.end());
}

}  // namespace luminal::egraph

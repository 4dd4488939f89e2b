#pragma once
// EGraph: e-classes of equivalent e-nodes with a union-find, a hash-cons and
// egg-style deferred rebuilding (merges queue their class; rebuild() restores
// congruence by re-canonicalising the parents of merged classes).
//
// The e-graph is language-neutral: an e-node is an op symbol, an interned
// attribute id (whose meaning the language defines) and child classes. Nodes
// live in one vector and their children in one flat arena, so adding a node
// costs no heap allocation of its own; the hash-cons is a flat hash set of node
// ids keyed by node content.
#include <absl/container/flat_hash_set.h>
#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "luminal/core/error.hpp"

namespace luminal::egraph {

using ClassId = std::uint32_t;
using ENodeId = std::uint32_t;
using Symbol = std::uint16_t;
using AttrId = std::uint32_t;

struct ENode {
    Symbol op;
    std::uint16_t arity;
    AttrId attr;
    std::uint32_t first_child;  // into the child arena
};

class EGraph {
public:
    EGraph() : hashcons_(0, NodeHash{this}, NodeEq{this}) {}
    EGraph(const EGraph&) = delete;
    EGraph& operator=(const EGraph&) = delete;

    // Adds an e-node (or finds the existing equal one) and returns its class.
    ClassId add(Symbol op, AttrId attr, std::span<const ClassId> children) {
        scratch_.clear();
        for (ClassId c : children) scratch_.push_back(find(c));
        NodeKey key{op, attr, scratch_};
        std::size_t h = hash_of(key);
        if (auto it = hashcons_.find(key); it != hashcons_.end()) return find(node_class_[*it]);
        ENodeId id = push_node(op, attr, scratch_);
        hashes_.push_back(h);
        ClassId c = static_cast<ClassId>(parent_.size());
        parent_.push_back(c);
        classes_.emplace_back().nodes.push_back(id);
        node_class_.push_back(c);
        alive_.push_back(true);
        stamp_.push_back(epoch_);
        hashcons_.insert(id);
        for (ClassId child : this->children(id)) classes_[find(child)].parents.push_back(id);
        if (by_op_.size() <= op) by_op_.resize(op + 1u);
        by_op_[op].push_back(id);
        ++live_nodes_;
        return c;
    }
    ClassId add(Symbol op, AttrId attr, std::initializer_list<ClassId> children) {
        return add(op, attr, std::span<const ClassId>(children.begin(), children.size()));
    }

    // The class of an e-node equal to (op, attr, children), if one exists.
    std::optional<ClassId> lookup(Symbol op, AttrId attr, std::span<const ClassId> children) const {
        std::vector<ClassId> canonical;
        for (ClassId c : children) canonical.push_back(find(c));
        auto it = hashcons_.find(NodeKey{op, attr, canonical});
        if (it == hashcons_.end()) return std::nullopt;
        return find(node_class_[*it]);
    }

    ClassId find(ClassId c) const {
        while (parent_[c] != c) {
            parent_[c] = parent_[parent_[c]];  // path halving
            c = parent_[c];
        }
        return c;
    }

    // Unions two classes; congruence is restored by the next rebuild().
    bool merge(ClassId a, ClassId b) {
        a = find(a);
        b = find(b);
        if (a == b) return false;
        if (classes_[a].parents.size() < classes_[b].parents.size()) std::swap(a, b);
        parent_[b] = a;
        EClass& into = classes_[a];
        EClass& from = classes_[b];
        for (ENodeId n : from.nodes) stamp_[n] = epoch_;  // their class changed: matches through them may be new
        into.nodes.insert(into.nodes.end(), from.nodes.begin(), from.nodes.end());
        into.parents.insert(into.parents.end(), from.parents.begin(), from.parents.end());
        from.nodes.clear();
        from.parents.clear();
        pending_.push_back(a);
        ++merges_;
        return true;
    }

    void rebuild() {
        while (!pending_.empty()) {
            std::vector<ClassId> todo;
            todo.swap(pending_);
            for (ClassId& c : todo) c = find(c);
            std::sort(todo.begin(), todo.end());
            todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
            for (ClassId c : todo) repair(find(c));
        }
    }
    bool clean() const { return pending_.empty(); }

    const ENode& node(ENodeId id) const { return nodes_[id]; }
    std::span<const ClassId> children(ENodeId id) const {
        const ENode& n = nodes_[id];
        return {arena_.data() + n.first_child, n.arity};
    }
    ClassId class_of(ENodeId id) const { return find(node_class_[id]); }
    bool alive(ENodeId id) const { return alive_[id]; }
    // The e-nodes of a canonical class (may include nodes made redundant by a
    // merge that rebuild() has not seen yet; skip those with alive()).
    std::span<const ENodeId> class_nodes(ClassId c) const { return classes_[find(c)].nodes; }
    // Every e-node with this op ever added, dead ones included.
    std::span<const ENodeId> nodes_with_op(Symbol op) const {
        if (op >= by_op_.size()) return {};
        return by_op_[op];
    }

    std::size_t num_nodes() const { return live_nodes_; }
    std::size_t total_nodes() const { return nodes_.size(); }
    std::size_t num_classes() const {
        std::size_t n = 0;
        for (ClassId c = 0; c < parent_.size(); ++c) n += parent_[c] == c;
        return n;
    }
    std::size_t class_capacity() const { return parent_.size(); }
    // Increases with every effective merge: lets the runner detect saturation.
    std::uint64_t merges() const { return merges_; }

    // Semi-naive matching: e-nodes added, moved to another class or
    // re-canonicalised are stamped with the current epoch, so a rule can skip
    // matches made only of e-nodes it has already seen.
    std::uint32_t next_epoch() { return ++epoch_; }
    std::uint32_t epoch() const { return epoch_; }
    std::uint32_t stamp(ENodeId id) const { return stamp_[id]; }

private:
    // Most classes hold one or two e-nodes and parents: inline storage keeps
    // creating a class free of heap allocations.
    struct EClass {
        absl::InlinedVector<ENodeId, 2> nodes;
        absl::InlinedVector<ENodeId, 2> parents;  // e-nodes that have this class as a child
    };

    // Hash-cons keys: stored e-nodes by id (their hash cached in hashes_), and
    // probes by content, so looking a node up never has to store it first.
    struct NodeKey {
        Symbol op;
        AttrId attr;
        std::span<const ClassId> children;
    };
    static std::size_t hash_of(const NodeKey& k) {
        std::uint64_t h = (std::uint64_t{k.op} << 48 | k.children.size() << 32 | k.attr) * 0x9E3779B97F4A7C15ull;
        for (ClassId c : k.children) h = (h ^ c) * 0xBF58476D1CE4E5B9ull + (h >> 29);
        return static_cast<std::size_t>(h ^ (h >> 31));
    }
    NodeKey key_of(ENodeId id) const {
        const ENode& n = nodes_[id];
        return {n.op, n.attr, {arena_.data() + n.first_child, n.arity}};
    }
    static bool same(const NodeKey& a, const NodeKey& b) {
        if (a.op != b.op || a.attr != b.attr || a.children.size() != b.children.size()) return false;
        for (std::size_t i = 0; i < a.children.size(); ++i)
            if (a.children[i] != b.children[i]) return false;
        return true;
    }
    struct NodeHash {
        using is_transparent = void;
        const EGraph* g;
        std::size_t operator()(ENodeId id) const { return g->hashes_[id]; }
        std::size_t operator()(const NodeKey& k) const { return hash_of(k); }
    };
    struct NodeEq {
        using is_transparent = void;
        const EGraph* g;
        bool operator()(ENodeId a, ENodeId b) const { return a == b || same(g->key_of(a), g->key_of(b)); }
        bool operator()(ENodeId a, const NodeKey& b) const { return same(g->key_of(a), b); }
        bool operator()(const NodeKey& a, ENodeId b) const { return same(a, g->key_of(b)); }
    };

    ENodeId push_node(Symbol op, AttrId attr, std::span<const ClassId> children) {
        check(children.size() <= 0xFFFF, "EGraph::add", "an e-node with {} children", children.size());
        auto first = static_cast<std::uint32_t>(arena_.size());
        arena_.insert(arena_.end(), children.begin(), children.end());
        nodes_.push_back(ENode{op, static_cast<std::uint16_t>(children.size()), attr, first});
        return static_cast<ENodeId>(nodes_.size() - 1);
    }

    // Re-canonicalises every parent of class c; parents that become equal merge.
    void repair(ClassId c) {
        absl::InlinedVector<ENodeId, 2> parents;
        parents.swap(classes_[c].parents);
        for (ENodeId p : parents) {
            if (!alive_[p]) continue;
            hashcons_.erase(p);
            bool changed = false;
            for (std::uint32_t i = 0; i < nodes_[p].arity; ++i) {
                ClassId& child = arena_[nodes_[p].first_child + i];
                ClassId canonical = find(child);
                changed |= canonical != child;
                child = canonical;
            }
            hashes_[p] = hash_of(key_of(p));
            if (auto it = hashcons_.find(p); it != hashcons_.end()) {
                alive_[p] = false;
                --live_nodes_;
                merge(node_class_[*it], node_class_[p]);
            } else {
                hashcons_.insert(p);
                if (changed) stamp_[p] = epoch_;
            }
        }
        parents.erase(std::remove_if(parents.begin(), parents.end(), [&](ENodeId p) { return !alive_[p]; }), parents.end());
        std::sort(parents.begin(), parents.end());
        parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
        ClassId root = find(c);
        auto& list = classes_[root].parents;
        list.insert(list.end(), parents.begin(), parents.end());
        auto& nodes = classes_[root].nodes;
        nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [&](ENodeId n) { return !alive_[n]; }), nodes.end());
    }

    std::vector<ENode> nodes_;
    std::vector<ClassId> arena_;
    std::vector<ClassId> node_class_;
    std::vector<bool> alive_;
    std::vector<std::uint32_t> stamp_;
    std::uint32_t epoch_ = 0;
    mutable std::vector<ClassId> parent_;
    std::vector<EClass> classes_;
    std::vector<std::vector<ENodeId>> by_op_;
    std::vector<ClassId> pending_;
    std::vector<std::size_t> hashes_;
    std::vector<ClassId> scratch_;
    absl::flat_hash_set<ENodeId, NodeHash, NodeEq> hashcons_;
    std::size_t live_nodes_ = 0;
    std::uint64_t merges_ = 0;
};

}  // namespace luminal::egraph

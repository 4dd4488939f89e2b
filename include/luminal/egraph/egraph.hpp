#pragma once
// EGraph: e-classes of equivalent e-nodes with a union-find, a hash-cons and
// egg-style deferred rebuilding (merges queue their class; rebuild() restores
// congruence by re-canonicalising the parents of merged classes).
//
// The e-graph is language-neutral: an e-node is an op symbol, an interned
// attribute id (whose meaning the language defines) and child classes. Nodes
// live in one vector (up to two children inline, wider nodes in a flat arena),
// so adding a node costs no heap allocation of its own. The hash-cons is an
// open-addressing table whose slots hold the node's key inline: saturation is
// dominated by lookups of nodes that already exist, and such a lookup then
// touches one cache line instead of chasing the node and its children.
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

inline constexpr std::size_t kInlineChildren = 2;

struct ENode {
    Symbol op;
    std::uint16_t arity;
    AttrId attr;
    union {
        ClassId inline_children[kInlineChildren];  // arity <= kInlineChildren
        std::uint32_t first_child;                 // into the child arena otherwise
    };
};

class EGraph {
public:
    EGraph() { slots_.resize(kInitialSlots); }
    EGraph(const EGraph&) = delete;
    EGraph& operator=(const EGraph&) = delete;

    // Adds an e-node (or finds the existing equal one) and returns its class.
    ClassId add(Symbol op, AttrId attr, std::span<const ClassId> children) {
        check(children.size() <= 0xFFFF, "EGraph::add", "an e-node with {} children", children.size());
        ClassId small[kInlineChildren];
        if (children.size() > kInlineChildren) scratch_.resize(children.size());
        std::span<ClassId> canonical(children.size() > kInlineChildren ? scratch_.data() : small, children.size());
        for (std::size_t i = 0; i < children.size(); ++i) canonical[i] = find(children[i]);
        NodeKey key{op, attr, canonical};
        std::size_t slot = probe(key, hash_of(key));
        if (Slot& s = slots_[slot]; s.node != kNoNode) return s.cls = find(s.cls);  // later hits skip the walk
        ENodeId id = push_node(op, attr, canonical);
        ClassId c = static_cast<ClassId>(parent_.size());
        parent_.push_back(c);
        classes_.emplace_back().nodes.push_back(id);
        node_class_.push_back(c);
        alive_.push_back(true);
        stamp_.push_back(epoch_);
        stamped_.push_back(id);
        occupy(slot, id, c);
        // Once per distinct child class, so delta matching never climbs through a node twice.
        for (std::size_t i = 0; i < canonical.size(); ++i)
            if (std::find(canonical.begin(), canonical.begin() + i, canonical[i]) == canonical.begin() + i)
                classes_[canonical[i]].parents.push_back(id);
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
        NodeKey key{op, attr, canonical};
        const Slot& s = slots_[probe(key, hash_of(key))];
        if (s.node == kNoNode) return std::nullopt;
        return find(s.cls);
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
        for (ENodeId n : from.nodes) touch(n);  // their class changed: matches through them may be new
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
        if (n.arity <= kInlineChildren) return {n.inline_children, n.arity};
        return {arena_.data() + n.first_child, n.arity};
    }
    ClassId class_of(ENodeId id) const { return node_class_[id] = find(node_class_[id]); }
    bool alive(ENodeId id) const { return alive_[id]; }
    // The e-nodes of a canonical class (may include nodes made redundant by a
    // merge that rebuild() has not seen yet; skip those with alive()).
    std::span<const ENodeId> class_nodes(ClassId c) const { return classes_[find(c)].nodes; }
    // The e-nodes with a child in canonical class c (after rebuild(): each once,
    // dead ones included).
    std::span<const ENodeId> class_parents(ClassId c) const { return classes_[find(c)].parents; }
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
    std::uint32_t next_epoch() {
        epoch_begins_.push_back(stamped_.size());
        return ++epoch_;
    }
    std::uint32_t epoch() const { return epoch_; }
    std::uint32_t stamp(ENodeId id) const { return stamp_[id]; }
    // Calls f(id) once for every e-node stamped at or after epoch `since`.
    template <typename F>
    void for_each_stamped_since(std::uint32_t since, F&& f) const {
        // stamped_ logs a node once per epoch that stamps it; only the entry of
        // its latest stamp counts.
        for (std::uint32_t e = since; e <= epoch_; ++e) {
            std::size_t end = e < epoch_ ? epoch_begins_[e + 1] : stamped_.size();
            for (std::size_t i = epoch_begins_[e]; i < end; ++i)
                if (stamp_[stamped_[i]] == e) f(stamped_[i]);
        }
    }

private:
    // Most classes hold one or two e-nodes and parents: inline storage keeps
    // creating a class free of heap allocations.
    struct EClass {
        absl::InlinedVector<ENodeId, 2> nodes;
        absl::InlinedVector<ENodeId, 2> parents;  // e-nodes that have this class as a child
    };

    struct NodeKey {
        Symbol op;
        AttrId attr;
        std::span<const ClassId> children;
    };
    static std::uint64_t hash_of(const NodeKey& k) {
        std::uint64_t h = (std::uint64_t{k.op} << 48 | k.children.size() << 32 | k.attr) * 0x9E3779B97F4A7C15ull;
        for (ClassId c : k.children) h = (h ^ c) * 0xBF58476D1CE4E5B9ull + (h >> 29);
        return h ^ (h >> 31);
    }
    NodeKey key_of(ENodeId id) const { return {nodes_[id].op, nodes_[id].attr, children(id)}; }

    // A hash-cons slot: the node's key (its first kInlineChildren children;
    // wider nodes compare the rest in the arena), the node and its class when
    // added (find() gives the current one). Linear probing, at most half full.
    static constexpr ENodeId kNoNode = 0xFFFFFFFF;
    static constexpr std::size_t kInitialSlots = 64;
    struct Slot {
        ENodeId node = kNoNode;
        ClassId cls = 0;
        Symbol op = 0;
        std::uint16_t arity = 0;
        AttrId attr = 0;
        ClassId children[kInlineChildren] = {};
    };
    std::size_t home(std::uint64_t hash) const {
        return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> (64 - slot_bits_));
    }
    NodeKey slot_key(const Slot& s) const {
        if (s.arity <= kInlineChildren) return {s.op, s.attr, {s.children, s.arity}};
        return key_of(s.node);
    }
    bool holds(const Slot& s, const NodeKey& k) const {
        if (s.op != k.op || s.attr != k.attr || s.arity != k.children.size()) return false;
        if (s.arity <= kInlineChildren) {
            for (std::size_t i = 0; i < s.arity; ++i)
                if (s.children[i] != k.children[i]) return false;
            return true;
        }
        return std::equal(k.children.begin(), k.children.end(), arena_.begin() + nodes_[s.node].first_child);
    }
    // The slot holding key, or the empty slot where it belongs.
    std::size_t probe(const NodeKey& key, std::uint64_t hash) const {
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = home(hash);; i = (i + 1) & mask)
            if (slots_[i].node == kNoNode || holds(slots_[i], key)) return i;
    }
    void occupy(std::size_t slot, ENodeId id, ClassId c) {
        const ENode& n = nodes_[id];
        Slot& s = slots_[slot];
        s = Slot{id, c, n.op, n.arity, n.attr, {}};
        std::span<const ClassId> kids = children(id);
        std::copy_n(kids.begin(), std::min(kids.size(), kInlineChildren), s.children);
        if (++slots_used_ * 2 > slots_.size()) grow();
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        ++slot_bits_;
        const std::size_t mask = slots_.size() - 1;
        for (const Slot& s : old) {
            if (s.node == kNoNode) continue;
            std::size_t i = home(hash_of(slot_key(s)));
            while (slots_[i].node != kNoNode) i = (i + 1) & mask;
            slots_[i] = s;
        }
    }
    // Removes node id (under its current key), shifting later entries of its
    // probe run back so no tombstones are needed.
    void vacate(ENodeId id) {
        const std::size_t mask = slots_.size() - 1;
        NodeKey key = key_of(id);
        std::size_t hole = probe(key, hash_of(key));
        for (std::size_t next = (hole + 1) & mask; slots_[next].node != kNoNode; next = (next + 1) & mask) {
            std::size_t want = home(hash_of(slot_key(slots_[next])));
            // Move the entry back if the hole lies on its probe path (between its home and its slot).
            if (((next - want) & mask) >= ((next - hole) & mask)) {
                slots_[hole] = slots_[next];
                hole = next;
            }
        }
        slots_[hole].node = kNoNode;
        --slots_used_;
    }

    ENodeId push_node(Symbol op, AttrId attr, std::span<const ClassId> children) {
        ENode n{op, static_cast<std::uint16_t>(children.size()), attr, {}};
        if (children.size() <= kInlineChildren) {
            std::copy(children.begin(), children.end(), n.inline_children);
        } else {
            n.first_child = static_cast<std::uint32_t>(arena_.size());
            arena_.insert(arena_.end(), children.begin(), children.end());
        }
        nodes_.push_back(n);
        return static_cast<ENodeId>(nodes_.size() - 1);
    }
    std::span<ClassId> children_mut(ENodeId id) {
        ENode& n = nodes_[id];
        if (n.arity <= kInlineChildren) return {n.inline_children, n.arity};
        return {arena_.data() + n.first_child, n.arity};
    }

    void touch(ENodeId n) {
        if (stamp_[n] == epoch_) return;
        stamp_[n] = epoch_;
        stamped_.push_back(n);
    }

    // Re-canonicalises every parent of class c; parents that become equal merge.
    // A parent whose children are all canonical already keeps its slot.
    void repair(ClassId c) {
        absl::InlinedVector<ENodeId, 2> parents;
        parents.swap(classes_[c].parents);
        for (ENodeId p : parents) {
            if (!alive_[p]) continue;
            std::span<ClassId> kids = children_mut(p);
            if (std::all_of(kids.begin(), kids.end(), [&](ClassId k) { return parent_[k] == k; })) continue;
            vacate(p);
            for (ClassId& k : kids) k = find(k);
            NodeKey key = key_of(p);
            std::size_t slot = probe(key, hash_of(key));
            if (slots_[slot].node != kNoNode) {
                alive_[p] = false;
                --live_nodes_;
                merge(slots_[slot].cls, node_class_[p]);
            } else {
                occupy(slot, p, node_class_[p]);
                touch(p);
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
    mutable std::vector<ClassId> node_class_;  // a class of the node, canonicalised on read
    std::vector<bool> alive_;
    std::vector<std::uint32_t> stamp_;
    std::vector<ENodeId> stamped_;           // nodes in the order they were stamped, once per epoch
    std::vector<std::size_t> epoch_begins_ = std::vector<std::size_t>(1, 0);  // where each epoch starts in stamped_
    std::uint32_t epoch_ = 0;
    mutable std::vector<ClassId> parent_;
    std::vector<EClass> classes_;
    std::vector<std::vector<ENodeId>> by_op_;
    std::vector<ClassId> pending_;
    std::vector<ClassId> scratch_;
    std::vector<Slot> slots_;
    std::size_t slots_used_ = 0;
    int slot_bits_ = 6;  // log2(slots_.size())
    std::size_t live_nodes_ = 0;
    std::uint64_t merges_ = 0;
};

}  // namespace luminal::egraph

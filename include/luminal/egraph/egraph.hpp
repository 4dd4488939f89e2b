#pragma once
// EGraph: e-classes of equivalent e-nodes with a union-find, a hash-cons and
// egg-style deferred rebuilding (a merge queues the parents of the class it
// absorbs; rebuild() restores congruence by re-canonicalising them).
//
// The e-graph is language-neutral: an e-node is an op symbol, an interned
// attribute id (whose meaning the language defines) and child classes. Nodes
// live in one vector (up to two children inline, wider nodes in a flat arena),
// so adding a node costs no heap allocation of its own. The hash-cons is an
// open-addressing table whose slots hold the node's key inline: saturation is
// dominated by lookups of nodes that already exist, and such a lookup then
// touches one cache line instead of chasing the node and its children.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/core/huge_page_allocator.hpp"
#include "luminal/egraph/id_list.hpp"

namespace luminal::egraph {

using ClassId = std::uint32_t;
using ENodeId = std::uint32_t;
using Symbol = std::uint16_t;
using AttrId = std::uint32_t;

inline constexpr std::size_t kInlineChildren = 2;  // the hash-cons key holds two children in one word

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
    EGraph() {
        // Room for a small graph up front: growing each per-node vector from
        // one element cost small saturations a dozen reallocations apiece.
        records_.reserve(kInitialNodes);
        changed_.reserve(kInitialNodes);
        parent_.reserve(kInitialNodes);
        classes_.reserve(kInitialNodes);
        slots_.resize(kInitialSlots);
    }
    EGraph(const EGraph&) = delete;
    EGraph& operator=(const EGraph&) = delete;
    ~EGraph() {
        for (EClass& c : classes_) {
            c.nodes.release(id_blocks_);
            for (IdList& parents : c.parents) parents.release(id_blocks_);
        }
    }

    // Adds an e-node (or finds the existing equal one) and returns its class.
    // Kept small and always inlined into rules, since most calls find an
    // existing node and the lookup is the hot path of saturation.
    [[gnu::always_inline]] ClassId add(Symbol op, AttrId attr, std::span<const ClassId> children) {
        if (children.size() > kInlineChildren) return add_wide(op, attr, children);
        ClassId kids[kInlineChildren];
        Key key = narrow_key(op, attr, children, kids);
        std::size_t slot = probe(key);
        if (Slot& s = slots_[slot]; s.node != kNoNode) return s.cls = find(s.cls);  // later hits skip the walk
        return insert(slot, key.head, key.kids, {kids, children.size()});
    }
    [[gnu::always_inline]] ClassId add(Symbol op, AttrId attr, std::initializer_list<ClassId> children) {
        return add(op, attr, std::span<const ClassId>(children.begin(), children.size()));
    }

    // A hint that add(op, attr, children) comes soon: loads its hash-cons
    // slot into cache. The children are taken as they are (no find()), so a
    // class merged away since only makes the hint miss.
    void prefetch(Symbol op, AttrId attr, std::initializer_list<ClassId> children) const {
        if (children.size() > kInlineChildren) return;
        ClassId kids[kInlineChildren] = {};
        std::copy(children.begin(), children.end(), kids);
        __builtin_prefetch(&slots_[home(hash_of({head_of(op, children.size(), attr), pair_of(kids[0], kids[1]), {}}))]);
    }

    // The class of an e-node equal to (op, attr, children), if one exists.
    std::optional<ClassId> lookup(Symbol op, AttrId attr, std::span<const ClassId> children) const {
        if (children.size() > kInlineChildren) return lookup_wide(op, attr, children);
        ClassId kids[kInlineChildren];
        return class_at(probe(narrow_key(op, attr, children, kids)));
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
        union_roots(a, b);
        return true;
    }

    // Restores congruence. Only the e-nodes with a child in a class merged
    // away since the last rebuild need a new key: the surviving class's own
    // parents are canonical already, and were four in five of the parents
    // when every parent of a merged class was re-canonicalised. Nodes that
    // become equal merge, which may make more nodes stale.
    void rebuild() {
        while (!stale_.empty()) {
            rebuilding_.clear();
            rebuilding_.swap(stale_);
            for (ENodeId p : rebuilding_) recanonicalise(p);
        }
        auto first = first_sighting(class_marks_, parent_.size());
        for (ClassId c : untidy_)
            if (ClassId root = find(c); first(root)) tidy(root);
        untidy_.clear();
    }
    bool clean() const { return stale_.empty(); }

    const ENode& node(ENodeId id) const { return records_[id].node; }
    std::span<const ClassId> children(ENodeId id) const {
        const ENode& n = node(id);
        if (n.arity <= kInlineChildren) return {n.inline_children, n.arity};
        return {arena_.data() + n.first_child, n.arity};
    }
    ClassId class_of(ENodeId id) const { return find(info(id).cls); }
    // The same for a live e-node, without find(): a merge updates the class
    // of every live node it moves (dead ones leave their class's list).
    ClassId live_class(ENodeId id) const { return info(id).cls; }
    bool alive(ENodeId id) const { return info(id).alive; }
    // The e-nodes of a canonical class (may include nodes made redundant by a
    // merge that rebuild() has not seen yet; skip those with alive()).
    std::span<const ENodeId> class_nodes(ClassId c) const { return classes_[find(c)].nodes; }
    // The e-nodes with canonical class c as their first child (position 0),
    // or as a later child (position 1: any but the first). After rebuild()
    // each live one is listed once per position; dead ones may remain.
    static constexpr std::size_t kParentPositions = 2;
    std::span<const ENodeId> class_parents(ClassId c, std::size_t position) const {
        return classes_[find(c)].parents[position];
    }
    // Every e-node with this op ever added, dead ones included.
    std::span<const ENodeId> nodes_with_op(Symbol op) const {
        if (op >= by_op_.size()) return {};
        return by_op_[op];
    }

    std::size_t num_nodes() const { return live_nodes_; }
    std::size_t total_nodes() const { return records_.size(); }
    std::size_t num_classes() const {
        std::size_t n = 0;
        for (ClassId c = 0; c < parent_.size(); ++c) n += parent_[c] == c;
        return n;
    }
    std::size_t class_capacity() const { return parent_.size(); }
    // Increases with every e-node added and every effective merge: lets the
    // runner see whether a rule changed the e-graph.
    std::uint64_t changes() const { return changes_; }

    // Semi-naive matching. An e-node is stamped with the current epoch when
    // it is added or re-canonicalised (its children changed), and marked moved
    // when a merge puts it in another class. A match is new when its root was
    // stamped, or a node below the root was stamped or moved, since the rule's
    // last search. A moved root alone changes nothing: a match does not
    // depend on the root's class, and counting it found every old match of
    // every node of a merged class again.
    std::uint32_t next_epoch() {
        epoch_begins_.push_back(changed_.size());
        return ++epoch_;
    }
    std::uint32_t epoch() const { return epoch_; }
    // Whether e-node id changed at or after epoch `since`, for a match that
    // has it at the pattern's root (at_root) or below.
    bool fresh_since(ENodeId id, std::uint32_t since, bool at_root) const {
        return info(id).stamp >= since || (!at_root && info(id).moved >= since);
    }
    // Calls f(id) once for every e-node fresh_since(id, since, at_root).
    template <typename F>
    void for_each_fresh_since(std::uint32_t since, bool at_root, F&& f) const {
        for (std::uint32_t e = since; e <= epoch_; ++e) {
            std::size_t end = e < epoch_ ? epoch_begins_[e + 1] : changed_.size();
            for (std::size_t i = epoch_begins_[e]; i < end; ++i) {
                ENodeId id = changed_[i].id;
                if (last_changed_in(id, e) && fresh_since(id, since, at_root)) f(id);
            }
        }
    }
    // The change log from entry `from` on: f(id, op, epoch) for each entry, in
    // order. Returns the log's length, where the next call can start.
    template <typename F>
    std::size_t for_each_change(std::size_t from, F&& f) const {
        auto e = static_cast<std::uint32_t>(std::upper_bound(epoch_begins_.begin(), epoch_begins_.end(), from) -
                                            epoch_begins_.begin() - 1);
        for (std::size_t i = from; i < changed_.size(); ++i) {
            while (e < epoch_ && epoch_begins_[e + 1] <= i) ++e;
            f(changed_[i].id, changed_[i].op, e);
        }
        return changed_.size();
    }
    // The epoch of e-node id's last add or re-canonicalisation: a rule that
    // keeps the ids of e-nodes it read tells by it whether their children changed since.
    std::uint32_t stamp_of(ENodeId id) const { return info(id).stamp; }
    // The log holds an e-node once per epoch that changed it; only the entry
    // of its latest change counts.
    bool last_changed_in(ENodeId id, std::uint32_t epoch) const {
        return std::max(info(id).stamp, info(id).moved) == epoch;
    }

private:
    struct EClass {
        IdList nodes;
        std::array<IdList, kParentPositions> parents;  // see class_parents()
    };

    // A node's hash-cons key: op, arity and attribute in one word, the first
    // two children in another, and any further children (in the arena).
    struct Key {
        std::uint64_t head;
        std::uint64_t kids;
        std::span<const ClassId> rest;
    };
    static std::uint64_t head_of(Symbol op, std::size_t arity, AttrId attr) {
        return std::uint64_t{op} | std::uint64_t{arity} << 16 | std::uint64_t{attr} << 32;
    }
    static std::uint64_t pair_of(ClassId first, ClassId second) { return first | std::uint64_t{second} << 32; }
    static Key key_from(Symbol op, AttrId attr, std::span<const ClassId> kids) {
        return {head_of(op, kids.size(), attr), pair_of(kids.size() > 0 ? kids[0] : 0, kids.size() > 1 ? kids[1] : 0),
                kids.size() > kInlineChildren ? kids.subspan(kInlineChildren) : std::span<const ClassId>{}};
    }
    Key key_of(ENodeId id) const { return key_from(node(id).op, node(id).attr, children(id)); }
    // The key of a node with at most kInlineChildren children, which are
    // canonicalised into kids.
    Key narrow_key(Symbol op, AttrId attr, std::span<const ClassId> children, ClassId (&kids)[kInlineChildren]) const {
        kids[0] = kids[1] = 0;
        for (std::size_t i = 0; i < children.size(); ++i) kids[i] = find(children[i]);
        return {head_of(op, children.size(), attr), pair_of(kids[0], kids[1]), {}};
    }
    // The slot index is taken from the top bits. The fold of the high half
    // before the last multiply matters: a purely multiplicative hash is
    // linear in the two children, and pairs of class ids then cluster under
    // linear probing.
    static std::uint64_t hash_of(const Key& k) {
        std::uint64_t h = k.head * 0x9E3779B97F4A7C15ull ^ k.kids;
        for (ClassId c : k.rest) h = std::rotl((h ^ c) * 0x9E3779B97F4A7C15ull, 29);
        h ^= h >> 32;
        return h * 0xBF58476D1CE4E5B9ull;
    }

    // A hash-cons slot: the node's key words (wider nodes compare the rest of
    // their children in the arena), the node and its class when added (find()
    // gives the current one). Linear probing, at most half full.
    static constexpr ENodeId kNoNode = 0xFFFFFFFF;
    static constexpr std::size_t kInitialNodes = 256;
    static constexpr std::size_t kInitialSlots = 2 * kInitialNodes;
    struct Slot {
        std::uint64_t head = 0;
        std::uint64_t kids = 0;
        ENodeId node = kNoNode;
        ClassId cls = 0;
    };
    std::size_t home(std::uint64_t hash) const { return static_cast<std::size_t>(hash >> (64 - slot_bits_)); }
    // slots_.size() - 1, without the division by the slot size that size() costs.
    std::size_t slot_mask() const { return (std::size_t{1} << slot_bits_) - 1; }
    Key slot_key(const Slot& s) const {
        if ((s.head >> 16 & 0xFFFF) <= kInlineChildren) return {s.head, s.kids, {}};
        return key_of(s.node);
    }
    bool holds(const Slot& s, const Key& k) const {
        if (s.head != k.head || s.kids != k.kids) return false;
        return k.rest.empty() || std::equal(k.rest.begin(), k.rest.end(), children(s.node).begin() + kInlineChildren);
    }
    // The slot holding key, or the empty slot where it belongs.
    [[gnu::always_inline]] std::size_t probe(const Key& key) const {
        const std::size_t mask = slot_mask();
        for (std::size_t i = home(hash_of(key));; i = (i + 1) & mask)
            if (slots_[i].node == kNoNode || holds(slots_[i], key)) return i;
    }
    void occupy(std::size_t slot, std::uint64_t head, std::uint64_t kids, ENodeId id, ClassId c) {
        slots_[slot] = Slot{head, kids, id, c};
        if (++slots_used_ * 2 > slots_.size()) grow();
    }
    // A small table grows fourfold: a saturation starts from a few hundred
    // slots, and each rehash costs a mispredicted branch or two per entry.
    // Past 2^16 slots the memory matters more, and it doubles. Out of line:
    // it is rare, and keeping it out of insert() keeps insert() small.
    static constexpr int kQuadrupleBelowBits = 16;
    [[gnu::noinline]] void grow() {
        const int step = slot_bits_ < kQuadrupleBelowBits ? 2 : 1;
        SlotTable old(slots_.size() << step);
        old.swap(slots_);
        slot_bits_ += step;
        const std::size_t mask = slots_.size() - 1;
        slots_used_ = 0;
        for (const Slot& s : old) {
            if (s.node == kNoNode || unreachable(s)) continue;
            ++slots_used_;
            std::size_t i = home(hash_of(slot_key(s)));
            while (slots_[i].node != kNoNode) i = (i + 1) & mask;
            slots_[i] = s;
        }
    }
    // Whether a narrow node's slot holds a key with a child class merged
    // away: lookups canonicalise their children, so none can reach it.
    // Re-canonicalising a narrow node leaves its old slot so (see
    // recanonicalise()), and the next grow() drops it.
    bool unreachable(const Slot& s) const {
        const std::size_t arity = s.head >> 16 & 0xFFFF;
        if (arity > kInlineChildren) return false;
        const auto first = static_cast<ClassId>(s.kids), second = static_cast<ClassId>(s.kids >> 32);
        return (arity > 0 && parent_[first] != first) || (arity > 1 && parent_[second] != second);
    }
    // Removes node id (under its current key), shifting later entries of its
    // probe run back so no tombstones are needed.
    void vacate(ENodeId id) {
        const std::size_t mask = slot_mask();
        Key key = key_of(id);
        std::size_t hole = probe(key);
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

    std::optional<ClassId> class_at(std::size_t slot) const {
        if (slots_[slot].node == kNoNode) return std::nullopt;
        return find(slots_[slot].cls);
    }
    [[gnu::noinline]] std::optional<ClassId> lookup_wide(Symbol op, AttrId attr, std::span<const ClassId> children) const {
        std::vector<ClassId> canonical;
        for (ClassId c : children) canonical.push_back(find(c));
        return class_at(probe(key_from(op, attr, canonical)));
    }
    [[gnu::noinline]] ClassId add_wide(Symbol op, AttrId attr, std::span<const ClassId> children) {
        check(children.size() <= 0xFFFF, "EGraph::add", "an e-node with {} children", children.size());
        scratch_.resize(children.size());
        for (std::size_t i = 0; i < children.size(); ++i) scratch_[i] = find(children[i]);
        Key key = key_from(op, attr, scratch_);
        std::size_t slot = probe(key);
        if (Slot& s = slots_[slot]; s.node != kNoNode) return s.cls = find(s.cls);
        return insert(slot, key.head, key.kids, scratch_);
    }
    // A new node in a new class, at the given empty slot; head and kids are
    // its key's words (passed by value: they stay in registers in add()).
    [[gnu::noinline]] ClassId insert(std::size_t slot, std::uint64_t head, std::uint64_t kids,
                                     std::span<const ClassId> canonical) {
        const auto op = static_cast<Symbol>(head & 0xFFFF);
        if (records_.size() == records_.capacity()) reserve_nodes();
        ClassId c = static_cast<ClassId>(parent_.size());
        ENodeId id = push_node(op, static_cast<AttrId>(head >> 32), canonical, c);
        parent_.push_back(c);
        classes_.emplace_back().nodes.push_back(id, id_blocks_);
        changed_.push_back({id, op});
        occupy(slot, head, kids, id, c);
        // Later children: once per distinct class, so delta matching never climbs through a node twice.
        for (std::size_t i = 0; i < canonical.size(); ++i)
            if (i == 0 || std::find(canonical.begin() + 1, canonical.begin() + i, canonical[i]) == canonical.begin() + i)
                classes_[canonical[i]].parents[std::min<std::size_t>(i, 1)].push_back(id, id_blocks_);
        if (by_op_.size() <= op) by_op_.resize(op + 1u);
        by_op_[op].push_back(id);
        ++live_nodes_;
        ++changes_;
        return c;
    }
    // The per-node vectors grow fourfold while small, like the hash-cons,
    // so fewer copies are made while a saturation starts.
    static constexpr std::size_t kQuadrupleBelowNodes = std::size_t{1} << 16;
    [[gnu::noinline]] void reserve_nodes() {
        std::size_t n = records_.capacity() * (records_.capacity() < kQuadrupleBelowNodes ? 4 : 2);
        records_.reserve(n);
        parent_.reserve(n);
        classes_.reserve(n);
        changed_.reserve(std::max(changed_.capacity(), 2 * n));  // a node is logged when added, then when changed
    }
    [[gnu::noinline]] void union_roots(ClassId a, ClassId b) {
        if (parent_count(a) < parent_count(b)) std::swap(a, b);
        parent_[b] = a;
        EClass& into = classes_[a];
        EClass& from = classes_[b];
        for (ENodeId n : from.nodes) {
            info(n).cls = a;
            mark_moved(n);
        }
        into.nodes.append(from.nodes, id_blocks_);
        from.nodes.release(id_blocks_);
        for (std::size_t i = 0; i < kParentPositions; ++i) {
            into.parents[i].append(from.parents[i], id_blocks_);
            stale_.insert(stale_.end(), from.parents[i].begin(), from.parents[i].end());
            from.parents[i].release(id_blocks_);
        }
        ++changes_;
    }

    // A new live e-node in class c, stamped with the current epoch.
    ENodeId push_node(Symbol op, AttrId attr, std::span<const ClassId> children, ClassId c) {
        ENode n{op, static_cast<std::uint16_t>(children.size()), attr, {}};
        if (children.size() <= kInlineChildren) {
            for (std::size_t i = 0; i < children.size(); ++i) n.inline_children[i] = children[i];  // std::copy called memmove
        } else {
            n.first_child = static_cast<std::uint32_t>(arena_.size());
            arena_.insert(arena_.end(), children.begin(), children.end());
        }
        records_.push_back({n, {c, epoch_, 0, true}});
        return static_cast<ENodeId>(records_.size() - 1);
    }
    std::span<ClassId> children_mut(ENodeId id) {
        ENode& n = records_[id].node;
        if (n.arity <= kInlineChildren) return {n.inline_children, n.arity};
        return {arena_.data() + n.first_child, n.arity};
    }

    // A predicate that is true the first time it sees each id below `bound`:
    // linear-time deduplication, where marks keeps the token of the last
    // call that saw each id.
    struct FirstSighting {
        std::vector<std::uint32_t>& marks;
        std::uint32_t token;
        bool operator()(std::uint32_t id) const { return std::exchange(marks[id], token) != token; }
    };
    FirstSighting first_sighting(std::vector<std::uint32_t>& marks, std::size_t bound) {
        if (marks.size() < bound) marks.resize(bound, 0);
        return {marks, ++mark_token_};
    }

    void log_change(ENodeId n) {
        if (info(n).stamp != epoch_ && info(n).moved != epoch_) changed_.push_back({n, node(n).op});
    }
    void stamp(ENodeId n) {
        if (info(n).stamp == epoch_) return;
        log_change(n);
        info(n).stamp = epoch_;
    }
    void mark_moved(ENodeId n) {
        if (info(n).moved == epoch_) return;
        log_change(n);
        info(n).moved = epoch_;
    }

    // Gives a stale e-node its canonical children and key; if an equal node
    // exists, it dies and the two classes merge. A node's later children
    // list it once per distinct class: two of them that were distinct classes
    // and are one now leave it listed twice there, and that class is tidied.
    void recanonicalise(ENodeId p) {
        if (!info(p).alive) return;
        std::span<ClassId> kids = children_mut(p);
        if (std::all_of(kids.begin(), kids.end(), [&](ClassId k) { return parent_[k] == k; })) return;  // done already
        if (kids.size() > kInlineChildren) {  // wide (rare)
            // Its slot compares the later children in place, so the old slot
            // would match the new key: remove it. It has several later
            // children: tidy each class one moved to, rather than compare pairs.
            vacate(p);
            for (ClassId k : kids.subspan(1))
                if (parent_[k] != k) untidy_.push_back(find(k));
        }
        for (ClassId& k : kids) k = find(k);
        Key key = key_of(p);
        std::size_t slot = probe(key);
        if (slots_[slot].node != kNoNode) {
            info(p).alive = false;
            --live_nodes_;
            merge(slots_[slot].cls, info(p).cls);
            untidy_.push_back(info(p).cls);  // its node list holds a dead node now
        } else {
            occupy(slot, key.head, key.kids, p, info(p).cls);
            stamp(p);
        }
    }
    // Drops dead e-nodes from a canonical class's lists, and repeated parents.
    void tidy(ClassId c) {
        auto first = first_sighting(node_marks_, records_.size());
        classes_[c].parents[0].filter([&](ENodeId p) { return info(p).alive; });
        classes_[c].parents[1].filter([&](ENodeId p) { return info(p).alive && first(p); });
        classes_[c].nodes.filter([&](ENodeId n) { return info(n).alive; });
    }
    std::size_t parent_count(ClassId c) const { return classes_[c].parents[0].size() + classes_[c].parents[1].size(); }

    // What matching reads of an e-node besides the node itself.
    struct NodeInfo {
        ClassId cls;          // canonical while the node lives (merges update the absorbed class's nodes)
        std::uint32_t stamp;  // epoch of the last add or re-canonicalisation
        std::uint32_t moved;  // epoch of the last move to another class
        bool alive;
    };
    // Both in one 32-byte record: matching reads a node and its info
    // together, and a random visit then touches one cache line, not two.
    struct NodeRecord {
        ENode node;
        NodeInfo info;
    };
    std::vector<NodeRecord> records_;
    NodeInfo& info(ENodeId id) { return records_[id].info; }
    const NodeInfo& info(ENodeId id) const { return records_[id].info; }
    std::vector<ClassId> arena_;
    struct Change {
        ENodeId id;
        Symbol op;  // the node's, so indexing the log by op reads no node
    };
    std::vector<Change> changed_;  // nodes in the order they changed, once per epoch
    std::vector<std::size_t> epoch_begins_ = std::vector<std::size_t>(1, 0);  // where each epoch starts in changed_
    std::uint32_t epoch_ = 0;
    mutable std::vector<ClassId> parent_;
    IdBlockPool id_blocks_;  // where the classes' longer lists live
    std::vector<EClass> classes_;
    std::vector<std::vector<ENodeId>> by_op_;
    std::vector<ENodeId> stale_;        // e-nodes with a child merged away since the last rebuild
    std::vector<ENodeId> rebuilding_;   // the stale nodes being re-canonicalised
    std::vector<ClassId> untidy_;       // classes whose lists hold dead or repeated e-nodes
    std::vector<std::uint32_t> node_marks_, class_marks_;
    std::uint32_t mark_token_ = 0;
    std::vector<ClassId> scratch_;
    using SlotTable = std::vector<Slot, HugePageAllocator<Slot>>;
    SlotTable slots_;
    std::size_t slots_used_ = 0;
    int slot_bits_ = std::countr_zero(kInitialSlots);  // log2(slots_.size())
    std::size_t live_nodes_ = 0;
    std::uint64_t changes_ = 0;
};

}  // namespace luminal::egraph

// EGraph core: union-find, hash-consing, congruence after rebuild, matching
// (including non-linear patterns), rule application and known fixpoints.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "arith_language.hpp"

using namespace luminal::egraph;
using arith::add;
using arith::mul;
using arith::num;
using arith::var;

TEST_CASE("hash-consing returns the existing class for an equal e-node") {
    EGraph g;
    ClassId x = var(g, 0), y = var(g, 1);
    ClassId a = add(g, x, y);
    CHECK(add(g, x, y) == a);
    CHECK(add(g, y, x) != a);
    CHECK(g.num_nodes() == 4);
    CHECK(g.lookup(arith::Add, 0, std::vector<ClassId>{x, y}) == a);
    CHECK_FALSE(g.lookup(arith::Mul, 0, std::vector<ClassId>{x, y}).has_value());
    CHECK(g.num_nodes() == 4);  // lookup adds nothing
}

TEST_CASE("hash-consing stays exact past a large table, with wide nodes and congruence") {
    // 2^17 binary nodes push the table past the 2 MiB where huge pages start.
    EGraph g;
    std::vector<ClassId> leaves;
    for (AttrId i = 0; i < 512; ++i) leaves.push_back(var(g, i));
    std::vector<ClassId> sums;
    for (ClassId a : leaves)
        for (std::size_t j = 0; j < 256; ++j) sums.push_back(add(g, a, leaves[j]));
    CHECK(g.num_nodes() == 512 + 512 * 256);
    std::size_t k = 0;
    for (ClassId a : leaves)
        for (std::size_t j = 0; j < 256; ++j, ++k) {
            REQUIRE(g.lookup(arith::Add, 0, std::vector<ClassId>{a, leaves[j]}) == sums[k]);
            CHECK_FALSE(g.lookup(arith::Mul, 0, std::vector<ClassId>{a, leaves[j]}).has_value());
        }
    // Wide nodes compare every child, not only the two held in the key words.
    std::vector<ClassId> four = {leaves[0], leaves[1], leaves[2], leaves[3]};
    std::vector<ClassId> other = {leaves[0], leaves[1], leaves[2], leaves[4]};
    ClassId w = g.add(arith::Add, 7, four);
    CHECK(g.add(arith::Add, 7, other) != w);
    CHECK(g.add(arith::Add, 7, four) == w);
    // Merging two leaves makes their sums with a third congruent, wide ones too.
    g.merge(leaves[3], leaves[4]);
    g.rebuild();
    CHECK(g.find(sums[3]) == g.find(sums[4]));
    CHECK(g.find(g.add(arith::Add, 7, other)) == g.find(w));
    CHECK(g.find(sums[5]) != g.find(sums[4]));
}

TEST_CASE("huge-page blocks are aligned and usable") {
    luminal::HugePageAllocator<std::uint64_t> alloc;
    std::size_t n = (std::size_t{3} << 20) / sizeof(std::uint64_t);
    std::uint64_t* big = alloc.allocate(n);
    CHECK(reinterpret_cast<std::uintptr_t>(big) % (std::size_t{2} << 20) == 0);
    for (std::size_t i = 0; i < n; ++i) big[i] = i;
    CHECK(big[n - 1] == n - 1);
    alloc.deallocate(big, n);
    std::uint64_t* small = alloc.allocate(16);
    small[15] = 1;
    alloc.deallocate(small, 16);
}

TEST_CASE("union-find merges and finds roots") {
    EGraph g;
    std::vector<ClassId> v;
    for (int i = 0; i < 6; ++i) v.push_back(var(g, static_cast<AttrId>(i)));
    CHECK(g.merge(v[0], v[1]));
    CHECK(g.merge(v[2], v[3]));
    CHECK(g.merge(v[1], v[3]));
    CHECK_FALSE(g.merge(v[0], v[2]));
    CHECK(g.find(v[0]) == g.find(v[3]));
    CHECK(g.find(v[4]) != g.find(v[0]));
    g.rebuild();
    CHECK(g.num_classes() == 3);
    CHECK(g.class_nodes(v[2]).size() == 4);
}

TEST_CASE("a live e-node's class stays canonical through merges and rebuilds") {
    // live_class() skips find(); merges must keep it equal to class_of().
    EGraph g;
    std::vector<ClassId> leaves;
    for (int i = 0; i < 8; ++i) leaves.push_back(var(g, static_cast<AttrId>(i)));
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) add(g, leaves[static_cast<std::size_t>(i)], leaves[static_cast<std::size_t>(j)]);
    auto agree = [&] {
        for (ENodeId n = 0; n < g.total_nodes(); ++n)
            if (g.alive(n) && g.live_class(n) != g.class_of(n)) return false;
        return true;
    };
    g.merge(leaves[0], leaves[1]);
    g.merge(leaves[2], leaves[3]);
    CHECK(agree());  // before rebuild
    g.merge(leaves[1], leaves[3]);
    g.rebuild();     // congruence merges sums of the merged leaves too
    CHECK(agree());
    CHECK(g.live_class(0) == g.find(leaves[2]));
    CHECK(g.num_nodes() == 8 + 5 * 5);  // leaves, then sums over {a|b|c|d}, e, f, g, h
}

TEST_CASE("rebuild restores congruence") {
    EGraph g;
    ClassId a = var(g, 0), b = var(g, 1), one = num(g, 1);
    ClassId fa = mul(g, a, one), fb = mul(g, b, one);
    ClassId gfa = add(g, fa, fa), gfb = add(g, fb, fb);
    CHECK(g.find(gfa) != g.find(gfb));
    g.merge(a, b);
    g.rebuild();
    CHECK(g.find(fa) == g.find(fb));    // f(a) == f(b) once a == b
    CHECK(g.find(gfa) == g.find(gfb));  // and upwards
    CHECK(g.num_nodes() == 5);          // duplicates collapsed: a, b, 1, f, g
    CHECK(add(g, fa, fb) == g.find(gfa));
}

TEST_CASE("after random merges, rebuild leaves every list and key as the definitions say") {
    // Nodes of arity 1-3 over random classes, merged in random batches; after
    // each rebuild, checked against the definitions: class_parents(c, 0)
    // lists each live node whose first child is c, and class_parents(c, 1)
    // each live node with c among its later children, once; a class lists
    // exactly its live nodes, each found under its own key; no two live
    // nodes are equal.
    std::mt19937 rng(7);
    EGraph g;
    std::vector<ClassId> classes;
    for (AttrId i = 0; i < 24; ++i) classes.push_back(var(g, i));
    auto leaf = [&] { return classes[rng() % 24]; };
    auto any = [&] { return classes[rng() % classes.size()]; };
    auto add_nodes = [&](int count) {
        for (int i = 0; i < count; ++i) {
            std::vector<ClassId> kids(1 + rng() % 3);
            for (ClassId& k : kids) k = rng() % 3 ? leaf() : any();
            classes.push_back(g.add(static_cast<Symbol>(10 + kids.size()), 0, kids));
        }
    };
    add_nodes(300);
    // Mostly leaves merge, so the e-graph shrinks slowly instead of
    // collapsing (a node merged with its own child makes a cycle), and
    // wide nodes often see two of their later children become one class.
    // Nodes added between batches make the hash-cons grow while it holds
    // the old keys of re-canonicalised nodes.
    for (int batch = 0; batch < 12; ++batch) {
        add_nodes(100);
        g.merge(leaf(), leaf());
        g.merge(leaf(), leaf());
        if (batch % 2) g.merge(any(), any());
        g.rebuild();
        std::size_t wrong = 0;
        std::vector<std::pair<ClassId, std::vector<ClassId>>> keys;
        for (ClassId c = 0; c < g.class_capacity(); ++c) {
            if (g.find(c) != c) continue;
            for (ENodeId n : g.class_nodes(c)) wrong += !g.alive(n) || g.class_of(n) != c;
            for (std::size_t position = 0; position < EGraph::kParentPositions; ++position) {
                std::vector<ENodeId> listed, expected;
                for (ENodeId p : g.class_parents(c, position))
                    if (g.alive(p)) listed.push_back(p);
                for (ENodeId p = 0; p < g.total_nodes(); ++p) {
                    auto kids = g.children(p);
                    if (!g.alive(p) || kids.empty()) continue;
                    if (position == 0 ? kids[0] == c : std::find(kids.begin() + 1, kids.end(), c) != kids.end())
                        expected.push_back(p);
                }
                std::sort(listed.begin(), listed.end());
                wrong += listed != expected;
            }
        }
        for (ENodeId p = 0; p < g.total_nodes(); ++p) {
            if (!g.alive(p)) continue;
            auto kids = g.children(p);
            auto nodes = g.class_nodes(g.class_of(p));
            wrong += std::find(nodes.begin(), nodes.end(), p) == nodes.end();
            wrong += g.lookup(g.node(p).op, g.node(p).attr, kids) != g.class_of(p);
            std::vector<ClassId> key = {g.node(p).op, g.node(p).attr};
            for (ClassId k : kids) key.push_back(g.find(k));
            keys.push_back({g.class_of(p), key});
        }
        std::sort(keys.begin(), keys.end(), [](auto& a, auto& b) { return a.second < b.second; });
        for (std::size_t i = 1; i < keys.size(); ++i) wrong += keys[i].second == keys[i - 1].second;
        CHECK(wrong == 0);
    }
}

TEST_CASE("matching enumerates every e-node in a class") {
    EGraph g;
    ClassId x = var(g, 0), y = var(g, 1);
    ClassId p = add(g, x, y), q = add(g, y, x);
    g.merge(p, q);
    g.rebuild();
    ClassId m = mul(g, p, num(g, 3));
    int matches = 0;
    for_each_match<Pat<arith::Mul, Pat<arith::Add, Var<0>, Var<1>>, Var<2>>>(g, [&](const Match& found) {
        ++matches;
        CHECK(found.root(g) == m);
        CHECK(g.node(found.node(1)).op == arith::Add);
        CHECK(found.var(2) == num(g, 3));
    });
    CHECK(matches == 2);
}

TEST_CASE("non-linear patterns need the same class twice") {
    EGraph g;
    ClassId x = var(g, 0), y = var(g, 1);
    add(g, x, x);
    ClassId xy = add(g, x, y);
    int matches = 0;
    for_each_match<Pat<arith::Add, Var<0>, Var<0>>>(g, [&](const Match&) { ++matches; });
    CHECK(matches == 1);
    g.merge(x, y);
    g.rebuild();
    matches = 0;
    for_each_match<Pat<arith::Add, Var<0>, Var<0>>>(g, [&](const Match& m) {
        ++matches;
        CHECK(m.root(g) == g.find(xy));
    });
    CHECK(matches == 1);  // x + x and x + y are now one e-node
}

TEST_CASE("matching needs a rebuilt e-graph") {
    // Matchers compare children by class id, which is only sound once
    // rebuild() has canonicalised every e-node.
    EGraph g;
    ClassId x = var(g, 0), y = var(g, 1);
    add(g, x, x);
    add(g, x, y);
    g.merge(x, y);
    using AddSelf = Pat<arith::Add, Var<0>, Var<0>>;
    int matches = 0;
    auto count = [&](const Match&) { ++matches; };
    CHECK_THROWS_AS(for_each_match<AddSelf>(g, count), luminal::Error);
    CHECK_THROWS_AS(for_each_fresh_match<AddSelf>(g, 0, count), luminal::Error);
    g.rebuild();
    for_each_match<AddSelf>(g, count);
    CHECK(matches == 1);
}

TEST_CASE("rules apply with guards") {
    EGraph g;
    arith::Context ctx;
    ClassId x = var(g, 0);
    ClassId e = add(g, mul(g, x, num(g, 1)), mul(g, num(g, 2), num(g, 3)));
    auto report = saturate(g, ctx, RuleSet<arith::MulByOne, arith::Folds<arith::Mul, arith::kMulFolds>>{});
    CHECK(report.stop == StopReason::Saturated);
    CHECK(g.find(e) == g.find(add(g, x, num(g, 6))));
    CHECK(report.rules[0].applications == 1);
    CHECK(report.rules[1].applications == 1);
    CHECK(report.to_string().find("mul-by-one") != std::string::npos);
}

TEST_CASE("associativity and commutativity reach the known fixpoint") {
    // For n distinct summands, AC saturation has one class per non-empty subset
    // (2^n - 1) and, per subset S of size >= 2, 2^|S| - 2 ordered splits:
    // 3^n - 2^(n+1) + 1 Add nodes plus the n leaves. n = 8 holds tens of
    // thousands of matches in one iteration (many match chunks, and bans
    // under the default limits).
    for (int n = 2; n <= 8; ++n) {
        EGraph g;
        arith::Context ctx;
        arith::sum_of_vars(g, n);
        auto report = saturate(g, ctx, arith::AcRules{});
        CHECK(report.stop == StopReason::Saturated);
        CHECK(g.num_classes() == (1u << n) - 1);
        auto nodes = static_cast<std::size_t>(std::pow(3, n) - std::pow(2, n + 1) + 1 + n);
        CHECK(g.num_nodes() == nodes);
    }
}

TEST_CASE("the classic rule set proves (x + 0*y) * 1 + x == 2 * x") {
    EGraph g;
    arith::Context ctx;
    ClassId x = var(g, 0), y = var(g, 1);
    ClassId lhs = add(g, mul(g, add(g, x, mul(g, num(g, 0), y)), num(g, 1)), x);
    ClassId rhs = mul(g, num(g, 2), x);
    // 0 * y is not folded (y is not a number): x + 0*y stays, so the two differ...
    auto report = saturate(g, ctx, arith::ClassicRules{});
    CHECK(report.stop == StopReason::Saturated);
    CHECK(g.find(lhs) != g.find(rhs));
    // ... while (x * 1) + x does reach 2 * x through mul-by-one, add-self, commutativity.
    ClassId simple = add(g, mul(g, x, num(g, 1)), x);
    saturate(g, ctx, arith::ClassicRules{});
    CHECK(g.find(simple) == g.find(rhs));
}

// Two rules that each add the next number to the class of the one before:
// one -> two (1 ~ 2), then two -> three (2 ~ 3).
template <std::int64_t From, const char* Name>
struct NextNumber {
    static constexpr std::string_view name = Name;
    using pattern = Pat<arith::Num>;
    static bool guard(const EGraph& g, arith::Context&, const Match& m) {
        return arith::number_of(g.node(m.node(0)).attr) == From;
    }
    static void apply(EGraph& g, arith::Context&, const Match& m) { g.merge(m.root(g), num(g, From + 1)); }
};
inline constexpr char kOneToTwo[] = "one-to-two", kTwoToThree[] = "two-to-three";
using OneThenTwo = RuleSet<NextNumber<1, kOneToTwo>, NextNumber<2, kTwoToThree>>;
using TwoThenOne = RuleSet<NextNumber<2, kTwoToThree>, NextNumber<1, kOneToTwo>>;

TEST_CASE("rules run in turn: a rule sees what the rules before it added in the same iteration") {
    auto run = [](auto rules) {
        EGraph g;
        arith::Context ctx;
        ClassId one = num(g, 1);
        auto report = saturate(g, ctx, rules);
        CHECK(report.stop == StopReason::Saturated);
        CHECK(g.find(one) == g.find(num(g, 3)));
        CHECK(g.num_nodes() == 3);
        return report.iterations;
    };
    // Iteration 1 adds 2, and two-to-three, searching after it, adds 3;
    // iteration 2 finds nothing new.
    CHECK(run(OneThenTwo{}) == 2);
    // two-to-three searches before 2 exists: 2 in iteration 1, 3 in 2, nothing in 3.
    CHECK(run(TwoThenOne{}) == 3);
}

TEST_CASE("limits stop an exploding rule set") {
    EGraph g;
    arith::Context ctx;
    arith::sum_of_vars(g, 14);  // the AC fixpoint has ~4.8 million e-nodes
    Limits limits;
    limits.nodes = 20'000;
    limits.seconds = 5;
    auto report = saturate(g, ctx, arith::AcRules{}, limits);
    INFO(report.to_string());
    CHECK(report.stop == StopReason::NodeLimit);
    CHECK(report.seconds < 5);
    CHECK(g.num_nodes() < 100'000);
}

TEST_CASE("the wall-clock limit is off unless asked for, and stops a run when set") {
    CHECK(Limits{}.seconds == std::numeric_limits<double>::infinity());
    EGraph g;
    arith::Context ctx;
    arith::sum_of_vars(g, 14);
    Limits limits;
    limits.seconds = 0;
    auto report = saturate(g, ctx, arith::AcRules{}, limits);
    INFO(report.to_string());
    CHECK(report.stop == StopReason::TimeLimit);
    CHECK(report.iterations == 1);
}

// Delta matching must find exactly the matches a full scan finds that contain
// a fresh e-node (each once), for linear, nested, non-linear and leaf patterns:
// a root that only moved to another class does not make its match fresh.
template <typename P>
void check_delta_matches(const EGraph& g, std::uint32_t since) {
    using Key = std::vector<std::uint32_t>;
    auto key = [](const Match& m) {  // a match fills only its pattern's variables and nodes
        Key k(m.vars.begin(), m.vars.begin() + PatternSize<P>::vars);
        k.insert(k.end(), m.nodes.begin(), m.nodes.begin() + PatternSize<P>::nodes);
        return k;
    };
    auto stamped = [&](ENodeId n, bool at_root) { return g.fresh_since(n, since, at_root); };
    // Dead e-nodes left in a class's list (duplicates of live ones) add nothing to it.
    // With child ops named (a rule's reads_child_ops), only a fresh e-node of one of them there counts.
    auto stamped_or_above = [&](ENodeId n, std::span<const Symbol> child_ops) {
        if (stamped(n, false)) return true;
        for (ClassId child : g.children(n))
            for (ENodeId x : g.class_nodes(child))
                if (g.alive(x) && stamped(x, false) &&
                    (child_ops.empty() || std::find(child_ops.begin(), child_ops.end(), g.node(x).op) != child_ops.end()))
                    return true;
        return false;
    };
    const std::array<Symbol, 1> nums = {arith::Num};
    std::vector<Key> scan_fresh, scan_above, scan_above_nums, delta_fresh, delta_above, delta_above_nums;
    for_each_match<P>(g, [&](const Match& m) {
        bool fresh = false, above = false, above_nums = false;
        for (int i = 0; i < PatternSize<P>::nodes; ++i) {
            fresh |= stamped(m.node(i), i == 0);
            above |= stamped_or_above(m.node(i), {});
            above_nums |= stamped_or_above(m.node(i), nums);
        }
        if (fresh) scan_fresh.push_back(key(m));
        if (above) scan_above.push_back(key(m));
        if (above_nums) scan_above_nums.push_back(key(m));
    });
    for_each_fresh_match<P>(g, since, [&](const Match& m) { delta_fresh.push_back(key(m)); });
    for_each_match_with_fresh_children<P>(g, since, [&](const Match& m) { delta_above.push_back(key(m)); });
    for_each_match_with_fresh_children<P>(g, since, [&](const Match& m) { delta_above_nums.push_back(key(m)); }, nums);
    for (auto* v : {&scan_fresh, &scan_above, &scan_above_nums, &delta_fresh, &delta_above, &delta_above_nums})
        std::sort(v->begin(), v->end());
    CHECK(delta_fresh == scan_fresh);
    CHECK(delta_above == scan_above);
    CHECK(delta_above_nums == scan_above_nums);
}

// x0*(x1*(x2*(x3*1))) + (x5 + (2 + (3 + x5))): products, sums and numbers for
// the classic rules to work on.
void add_products_and_sums(EGraph& g) {
    ClassId prod = mul(g, var(g, 3), num(g, 1));
    for (int i = 2; i >= 0; --i) prod = mul(g, var(g, static_cast<AttrId>(i)), prod);
    add(g, prod, add(g, var(g, 5), add(g, num(g, 2), add(g, num(g, 3), var(g, 5)))));
}

TEST_CASE("a fresh-node index caught up between iterations lists each fresh e-node once") {
    EGraph g;
    arith::Context ctx;
    add_products_and_sums(g);
    delta::FreshByOp index;
    Limits one_iteration;
    one_iteration.iterations = 1;
    for (int step = 0; step < 5; ++step) {
        saturate(g, ctx, arith::ClassicRules{}, one_iteration);
        index.catch_up(g);
    }
    for (std::uint32_t since = 1; since <= g.epoch(); ++since) {
        index.set_since(since);
        for (Symbol op : {arith::Num, arith::Var, arith::Add, arith::Mul}) {
            for (bool at_root : {false, true}) {
                std::vector<ENodeId> listed, expected;
                index.for_each(at_root, op, [&](ENodeId id) { listed.push_back(id); });
                for (ENodeId id = 0; id < g.total_nodes(); ++id)
                    if (g.node(id).op == op && g.fresh_since(id, since, at_root)) expected.push_back(id);
                std::sort(listed.begin(), listed.end());
                CHECK(listed == expected);
            }
        }
    }
}

TEST_CASE("delta matching finds exactly the fresh matches") {
    using V0 = luminal::egraph::Var<0>;
    using V1 = luminal::egraph::Var<1>;
    using V2 = luminal::egraph::Var<2>;
    for (std::size_t iterations = 1; iterations <= 5; ++iterations) {
        EGraph g;
        arith::Context ctx;
        add_products_and_sums(g);
        mul(g, mul(g, var(g, 2), num(g, -1)), num(g, -1));
        Limits limits;
        limits.iterations = iterations;
        saturate(g, ctx, arith::ClassicRules{}, limits);
        for (std::uint32_t since = 1; since <= g.epoch(); ++since) {
            check_delta_matches<Pat<arith::Add, V0, Pat<arith::Add, V1, V2>>>(g, since);
            check_delta_matches<Pat<arith::Mul, Pat<arith::Mul, V0, Pat<arith::Num>>, Pat<arith::Num>>>(g, since);
            check_delta_matches<Pat<arith::Mul, Pat<arith::Add, V0, V1>, Pat<arith::Add, V1, V0>>>(g, since);
            check_delta_matches<Pat<arith::Add, V0, V0>>(g, since);
            check_delta_matches<AnyArity<arith::Mul>>(g, since);
        }
    }
}

#pragma once
// Runner: saturates an e-graph with a RuleSet under limits (iterations, live
// e-nodes, wall time). An iteration runs the rules in turn: each searches the
// e-graph as the rules before it left it, applies its matches, and the
// e-graph is rebuilt before the next rule searches. egg and egglog search
// every rule before applying any; without limits both reach the same fixpoint
// (saturation does not depend on the order), but a rule that sees what the
// rules before it added in the same iteration has less left to find later,
// so the fixpoint takes fewer iterations and matches.
// A backoff scheduler throttles rules that explode: a rule finding more than
// match_limit << times_banned matches is banned for ban_length <<
// times_banned iterations (egg's BackoffScheduler).
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "luminal/egraph/rule.hpp"

namespace luminal::egraph {

// The iteration and node limits are the defaults' backstops because they are
// deterministic; a wall-clock limit is opt-in, as one would make the program a
// compilation picks depend on how fast and how loaded the machine is.
struct Limits {
    std::size_t iterations = 64;
    std::size_t nodes = 2'000'000;
    double seconds = std::numeric_limits<double>::infinity();
    std::size_t match_limit = 20'000;
    std::size_t ban_length = 2;
};

enum class StopReason { Saturated, IterationLimit, NodeLimit, TimeLimit };

constexpr std::string_view name_of(StopReason r) {
    switch (r) {
        case StopReason::Saturated: return "saturated";
        case StopReason::IterationLimit: return "iteration limit";
        case StopReason::NodeLimit: return "node limit";
        case StopReason::TimeLimit: return "time limit";
    }
    return "?";
}

struct RuleReport {
    std::string_view name;
    std::size_t matches = 0;       // found while not banned
    std::size_t applications = 0;  // matches whose apply changed the e-graph
    std::size_t nodes_added = 0;
    std::size_t times_banned = 0;
    double search_seconds = 0, apply_seconds = 0;  // apply includes the rebuild after it
};

struct RunReport {
    std::vector<RuleReport> rules;
    std::size_t iterations = 0;
    StopReason stop = StopReason::Saturated;
    double seconds = 0;
    std::size_t classes = 0, nodes = 0;

    std::string to_string() const {
        std::string out = fmt::format("{} after {} iterations in {:.3f} s: {} e-classes, {} e-nodes\n", name_of(stop),
                                      iterations, seconds, classes, nodes);
        out += fmt::format("  {:<36} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9}\n", "rule", "matches", "applied", "nodes+",
                           "bans", "search s", "apply s");
        for (const RuleReport& r : rules)
            out += fmt::format("  {:<36} {:>9} {:>9} {:>9} {:>6} {:>9.4f} {:>9.4f}\n", r.name, r.matches, r.applications,
                               r.nodes_added, r.times_banned, r.search_seconds, r.apply_seconds);
        return out;
    }
};

namespace detail {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <typename R>
struct RuleState {
    using Pattern = matcher_pattern_t<typename R::pattern>;
    static constexpr std::size_t kVars = PatternSize<Pattern>::vars;
    static constexpr std::size_t kNodes = PatternSize<Pattern>::nodes;

    std::size_t banned_until = 0;
    std::uint32_t seen_before = 0;  // matches only of e-nodes stamped before this were applied already
    std::uint32_t searched_at = 0;  // the epoch of this iteration's search
    bool complete = false;          // this iteration's search was neither banned nor cut off
    // This iteration's matches, packed to the pattern's own variables and
    // nodes: a search can hold a million of them. Fixed-size chunks, kept
    // from one iteration to the next, so a growing search never copies the
    // matches it holds.
    using Packed = std::array<std::uint32_t, kVars + kNodes>;
    static constexpr std::size_t kChunk = 1024;  // small enough that malloc does not mmap a chunk
    std::vector<std::unique_ptr<Packed[]>> chunks;
    std::size_t full_chunks = 0;  // chunks before the one being filled
    Packed* next = nullptr;       // the next free entry of that chunk
    Packed* chunk_end = nullptr;

    std::size_t size() const {
        if (next == nullptr) return 0;
        return full_chunks * kChunk + static_cast<std::size_t>(kChunk - (chunk_end - next));
    }
    void clear() {
        full_chunks = 0;
        next = chunk_end = nullptr;
    }
    // Plain loops: std::copy_n of a few words became a memcpy call per match.
    void push(const Match& m) {
        if (next == chunk_end) start_chunk();
        Packed& p = *next++;
        for (std::size_t v = 0; v < kVars; ++v) p[v] = m.vars[v];
        for (std::size_t n = 0; n < kNodes; ++n) p[kVars + n] = m.nodes[n];
    }
    [[gnu::noinline]] void start_chunk() {
        if (next != nullptr) ++full_chunks;
        if (full_chunks == chunks.size()) chunks.push_back(std::make_unique_for_overwrite<Packed[]>(kChunk));
        next = chunks[full_chunks].get();
        chunk_end = next + kChunk;
    }
    MatchOf<typename R::pattern> at(std::size_t i) const {
        const Packed& p = chunks[i / kChunk][i % kChunk];
        MatchOf<typename R::pattern> m;
        for (std::size_t v = 0; v < kVars; ++v) m.vars[v] = p[v];
        for (std::size_t n = 0; n < kNodes; ++n) m.nodes[n] = p[kVars + n];
        return m;
    }
};

// Returns false when the rule is banned this iteration (its matches are not applied).
template <typename R>
bool search_rule(const EGraph& g, const Limits& limits, std::size_t iteration, delta::FreshByOp& fresh,
                 RuleState<R>& state, RuleReport& report) {
    state.clear();
    state.complete = false;
    if (state.banned_until > iteration) return false;
    state.searched_at = g.epoch();
    std::size_t threshold = limits.match_limit << report.times_banned;
    bool overflow = false;
    std::size_t kept = 0;
    auto keep = [&](const Match& m) {
        if (kept > threshold) overflow = true;
        else state.push(m), ++kept;
    };
    // Semi-naive: after a complete search, only matches with an e-node
    // stamped since are new (the first search sees every e-node as new).
    using Pattern = typename RuleState<R>::Pattern;
    if (state.seen_before == 0) for_each_match<Pattern>(g, keep);
    else if constexpr (reads_child_classes<R>()) for_each_match_with_fresh_children<Pattern>(g, state.seen_before, keep, child_ops<R>());
    else {
        fresh.catch_up(g);
        fresh.set_since(state.seen_before);
        for_each_fresh_match<Pattern>(g, fresh, keep);
    }
    if (overflow) {
        state.banned_until = iteration + (limits.ban_length << report.times_banned);
        ++report.times_banned;
        state.clear();
    }
    state.complete = !overflow;
    report.matches += state.size();
    return !overflow;
}

// How many matches ahead rule_prefetch() runs: enough for a slot to arrive
// from L2 or L3 while apply() handles the matches in between.
inline constexpr std::size_t kPrefetchDistance = 6;

template <typename R, typename Ctx>
void apply_rule(EGraph& g, Ctx& ctx, const Limits& limits, Clock::time_point run_start, RuleState<R>& state,
                RuleReport& report) {
    const std::size_t count = state.size();
    const std::size_t nodes_before = g.total_nodes();
    for (std::size_t i = 0; i < count; ++i) {
        // Limits are checked every 256 matches (reading the clock per match
        // is not cheap), so a run may pass the node limit by what that many
        // matches add.
        if ((i & 255) == 255 && (g.num_nodes() > limits.nodes || seconds_since(run_start) > limits.seconds)) {
            state.complete = false;
            break;
        }
        if (i + kPrefetchDistance < count) rule_prefetch<R>(g, state.at(i + kPrefetchDistance));
        const MatchOf<typename R::pattern> m = state.at(i);
        if (!rule_guard<R>(g, ctx, m)) continue;
        std::uint64_t before = g.changes();
        rule_apply<R>(g, ctx, m);
        report.applications += g.changes() != before;
    }
    report.nodes_added += g.total_nodes() - nodes_before;
    if (state.complete) state.seen_before = state.searched_at;
}

// Adds the time since the previous call to a report field: one clock read
// per phase boundary, as on small e-graphs a whole search takes about as long
// as reading the clock.
class Lap {
public:
    void operator()(double& seconds) {
        auto now = Clock::now();
        seconds += std::chrono::duration<double>(now - last_).count();
        last_ = now;
    }

private:
    Clock::time_point last_ = Clock::now();
};

}  // namespace detail

template <typename Ctx, typename... Rules>
RunReport saturate(EGraph& g, Ctx& ctx, RuleSet<Rules...>, const Limits& limits = {}) {
    static_assert((RewriteRule<Rules, Ctx> && ...),
                  "every rule needs a name, a pattern, and apply(EGraph&, Ctx&, const MatchOf<pattern>&) or an rhs");
    auto start = detail::Clock::now();
    RunReport report;
    report.rules = {RuleReport{Rules::name}...};
    std::tuple<detail::RuleState<Rules>...> states;
    delta::FreshByOp fresh;  // shared by the rules' searches
    using Rule = std::tuple<Rules...>;
    auto for_each_rule = [](auto&& step) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (step(std::integral_constant<std::size_t, I>{}), ...);
        }(std::index_sequence_for<Rules...>{});
    };
    g.rebuild();
    for (;;) {
        if (report.iterations >= limits.iterations) {
            report.stop = StopReason::IterationLimit;
            break;
        }
        std::size_t it = report.iterations++;
        std::uint64_t changes_before = g.changes();
        bool all_searched = true;
        detail::Lap lap;
        for_each_rule([&](auto i) {
            using R = std::tuple_element_t<i, Rule>;
            RuleReport& rule_report = report.rules[i];
            g.next_epoch();
            all_searched &= detail::search_rule<R>(g, limits, it, fresh, std::get<i>(states), rule_report);
            lap(rule_report.search_seconds);
            detail::apply_rule<R, Ctx>(g, ctx, limits, start, std::get<i>(states), rule_report);
            g.rebuild();
            lap(rule_report.apply_seconds);
        });
        bool changed = g.changes() != changes_before;
        if (g.num_nodes() > limits.nodes) {
            report.stop = StopReason::NodeLimit;
            break;
        }
        if (detail::seconds_since(start) > limits.seconds) {
            report.stop = StopReason::TimeLimit;
            break;
        }
        if (!changed) {
            if (all_searched) {
                report.stop = StopReason::Saturated;
                break;
            }
            std::apply([](auto&... s) { ((s.banned_until = 0), ...); }, states);  // nothing else to do: lift the bans now
        }
    }
    report.seconds = detail::seconds_since(start);
    report.classes = g.num_classes();
    report.nodes = g.num_nodes();
    return report;
}

}  // namespace luminal::egraph

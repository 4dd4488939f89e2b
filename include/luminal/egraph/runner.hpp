#pragma once
// Runner: saturates an e-graph with a RuleSet under limits (iterations, live
// e-nodes, wall time). Each iteration searches every rule on the same e-graph,
// then applies all matches, then rebuilds. A backoff scheduler throttles rules
// that explode: a rule finding more than match_limit << times_banned matches
// is banned for ban_length << times_banned iterations (egg's BackoffScheduler).
#include <array>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "luminal/egraph/rule.hpp"

namespace luminal::egraph {

struct Limits {
    std::size_t iterations = 64;
    std::size_t nodes = 2'000'000;
    double seconds = 10.0;
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
    double search_seconds = 0, apply_seconds = 0;
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

struct RuleState {
    std::size_t banned_until = 0;
    std::uint32_t seen_before = 0;  // matches only of e-nodes stamped before this were applied already
    std::uint32_t searched_at = 0;  // the epoch of this iteration's search
    bool complete = false;          // this iteration's search was neither banned nor cut off
    std::vector<Match> matches;
};

// Returns false when the rule is banned this iteration (its matches are not applied).
template <typename R, typename Ctx>
bool search_rule(const EGraph& g, const Limits& limits, std::size_t iteration, RuleState& state, RuleReport& report) {
    auto start = Clock::now();
    state.matches.clear();
    state.complete = false;
    if (state.banned_until > iteration) return false;
    state.searched_at = g.epoch();
    std::size_t threshold = limits.match_limit << report.times_banned;
    bool overflow = false;
    constexpr int nodes = PatternSize<typename R::pattern>::nodes;
    for_each_match<typename R::pattern>(g, [&](const Match& m) {
        if constexpr (semi_naive<R>()) {
            bool fresh = false;
            for (int i = 0; i < nodes; ++i) fresh |= g.stamp(m.nodes[i]) >= state.seen_before;
            if (!fresh) return;
        }
        if (state.matches.size() > threshold) {
            overflow = true;
            return;
        }
        state.matches.push_back(m);
    });
    if (overflow) {
        state.banned_until = iteration + (limits.ban_length << report.times_banned);
        ++report.times_banned;
        state.matches.clear();
    }
    state.complete = !overflow;
    report.matches += state.matches.size();
    report.search_seconds += seconds_since(start);
    return !overflow;
}

template <typename R, typename Ctx>
void apply_rule(EGraph& g, Ctx& ctx, const Limits& limits, Clock::time_point run_start, RuleState& state,
                RuleReport& report) {
    auto start = Clock::now();
    std::size_t applied = 0;
    for (const Match& m : state.matches) {
        // The clock is read every 256 matches: reading it per match cost ~9% of saturation.
        if (g.num_nodes() > limits.nodes || ((++applied & 255) == 0 && seconds_since(run_start) > limits.seconds)) {
            state.complete = false;
            break;
        }
        std::size_t nodes = g.total_nodes();
        std::uint64_t merges = g.merges();
        if (!rule_guard<R>(g, ctx, m)) continue;
        R::apply(g, ctx, m);
        report.nodes_added += g.total_nodes() - nodes;
        report.applications += g.total_nodes() != nodes || g.merges() != merges;
    }
    report.apply_seconds += seconds_since(start);
    if (state.complete) state.seen_before = state.searched_at;
}

}  // namespace detail

template <typename Ctx, typename... Rules>
RunReport saturate(EGraph& g, Ctx& ctx, RuleSet<Rules...>, const Limits& limits = {}) {
    static_assert((RewriteRule<Rules, Ctx> && ...), "every rule needs name, pattern and apply(EGraph&, Ctx&, const Match&)");
    constexpr std::size_t n = sizeof...(Rules);
    auto start = detail::Clock::now();
    RunReport report;
    report.rules = {RuleReport{Rules::name}...};
    std::array<detail::RuleState, n> states;
    g.rebuild();
    for (;;) {
        if (report.iterations >= limits.iterations) {
            report.stop = StopReason::IterationLimit;
            break;
        }
        [[maybe_unused]] std::size_t it = report.iterations++;
        std::size_t nodes_before = g.total_nodes();
        std::uint64_t merges_before = g.merges();
        g.next_epoch();
        std::size_t i = 0;
        bool all_searched = true;
        ((all_searched &= detail::search_rule<Rules, Ctx>(g, limits, it, states[i], report.rules[i]), ++i), ...);
        i = 0;
        ((detail::apply_rule<Rules, Ctx>(g, ctx, limits, start, states[i], report.rules[i]), ++i), ...);
        g.rebuild();
        bool changed = g.total_nodes() != nodes_before || g.merges() != merges_before;
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
            for (auto& s : states) s.banned_until = 0;  // nothing else to do: lift the bans now
        }
    }
    report.seconds = detail::seconds_since(start);
    report.classes = g.num_classes();
    report.nodes = g.num_nodes();
    return report;
}

}  // namespace luminal::egraph

#pragma once
// Profiled search: start from the cost model's choice, then mutate it (re-pick
// the e-node of 1-3 reachable classes), skip cyclic or already seen choices
// (an order-independent XOR hash over (class, e-node) pairs, updated per
// mutation), lower each candidate, time it on the runtime at each workload
// with safe dummy inputs, and keep the fastest. A seeded generator makes it
// deterministic.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <unordered_set>

#include "luminal/egraph/compile_options.hpp"
#include "luminal/egraph/compile_times.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/graph/graph_tensor.hpp"

namespace luminal::egraph {

namespace detail {

inline std::uint64_t choice_entry_hash(ClassId c, ENodeId n) {
    std::uint64_t h = (std::uint64_t{c} << 32 | n) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

inline std::uint64_t choice_hash(const Choice& choice) {
    std::uint64_t h = 0;
    for (ClassId c = 0; c < choice.size(); ++c)
        if (choice[c] != kNoChoice) h ^= choice_entry_hash(c, choice[c]);
    return h;
}

// Binds program inputs to data that cannot fault: floats 1 (no zero into
// recip/log/mod), integers 0 (always an in-range index) except divisors of an
// integer modulo, which get 1. Inputs of a static shape are bound once per
// search (a candidate load keeps them); those whose shape uses a dim are
// bound again for each workload.
template <typename Runtime>
void bind_dummy_inputs(Runtime& rt, const Program& p, const Graph& graph, const DynMap& dims, bool dynamic_only) {
    std::vector<bool> divisor(p.nodes.size(), false);
    for (auto& n : p.nodes)
        if (n.spec.kind == symbol_of(OpKind::Mod)) divisor[n.sources[1]] = true;
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
        const NodeSpec& s = p.nodes[i].spec;
        if (s.kind != symbol_of(OpKind::Input)) continue;
        const bool dynamic = std::any_of(s.shape.begin(), s.shape.end(), [](auto& d) { return !d.dims().empty(); });
        if (dynamic_only && !dynamic) continue;
        std::int64_t n = 1;
        for (auto& d : s.shape) n *= d.eval(dims);
        GraphTensor t(const_cast<Graph*>(&graph), s.hlir, ShapeTracker(s.shape), s.dtype);
        if (is_float(s.dtype)) rt.set_data(t, std::vector<float>(static_cast<std::size_t>(n), 1.0f));
        else rt.set_data(t, std::vector<std::int64_t>(static_cast<std::size_t>(n), divisor[i] ? 1 : 0));
    }
}

// A candidate's weighted time over the workloads, on the runtime's own timer.
// The first candidate binds every input; later ones keep the static ones.
template <typename Runtime>
double profile(Runtime& rt, Program p, const Graph& graph, const std::vector<Workload>& workloads, bool first) {
    p.carried = graph.carried();  // timed with the in-place state updates the final program gets
    rt.load(p, first ? InputBinding::Drop : InputBinding::Keep);
    double seconds = 0;
    for (std::size_t w = 0; w < workloads.size(); ++w) {
        bind_dummy_inputs(rt, p, graph, workloads[w].dims, !(first && w == 0));
        seconds += workloads[w].weight * rt.time_execution(workloads[w].dims, 3);
    }
    return seconds;
}

}  // namespace detail

// Produces distinct acyclic choices, each 1-3 random re-picks away from a base
// choice (the search moves the base to each new best). Deterministic per seed.
class CandidateGenerator {
public:
    CandidateGenerator(const HlirEGraph& h, Choice base, std::uint64_t seed)
        : h_(h), base_(std::move(base)), base_hash_(detail::choice_hash(base_)), rng_(seed) {
        const EGraph& g = h.graph;
        for (ClassId c = 0; c < g.class_capacity(); ++c) {
            if (g.find(c) != c) continue;
            std::size_t alive = 0;
            for (ENodeId n : g.class_nodes(c)) alive += g.alive(n);
            if (alive > 1) alternatives_.push_back(c);
        }
        seen_.insert(base_hash_);
    }

    bool has_alternatives() const { return !alternatives_.empty(); }
    const Choice& base() const { return base_; }
    void set_base(Choice choice) {
        base_ = std::move(choice);
        base_hash_ = detail::choice_hash(base_);
    }

    // A new candidate, or nullopt after `attempts` tries found nothing unseen.
    std::optional<Choice> next(std::size_t attempts = 200) {
        const EGraph& g = h_.graph;
        std::vector<ClassId> reachable = reachable_postorder(g, base_, h_.roots);
        std::sort(reachable.begin(), reachable.end());
        std::vector<ClassId> mutable_classes;
        std::set_intersection(alternatives_.begin(), alternatives_.end(), reachable.begin(), reachable.end(),
                              std::back_inserter(mutable_classes));
        if (mutable_classes.empty()) return std::nullopt;
        for (std::size_t attempt = 0; attempt < attempts; ++attempt) {
            Choice candidate = base_;
            std::uint64_t hash = base_hash_;
            int mutations = 1 + static_cast<int>(rng_() % 3);
            for (int m = 0; m < mutations; ++m) {
                ClassId c = mutable_classes[rng_() % mutable_classes.size()];
                std::vector<ENodeId> others;
                for (ENodeId n : g.class_nodes(c))
                    if (g.alive(n) && n != candidate[c]) others.push_back(n);
                ENodeId pick = others[rng_() % others.size()];
                hash ^= detail::choice_entry_hash(c, candidate[c]) ^ detail::choice_entry_hash(c, pick);
                candidate[c] = pick;
            }
            if (seen_.contains(hash) || !is_acyclic(g, candidate, h_.roots)) continue;
            seen_.insert(hash);
            return candidate;
        }
        return std::nullopt;
    }

private:
    const HlirEGraph& h_;
    Choice base_;
    std::uint64_t base_hash_;
    std::mt19937_64 rng_;
    std::vector<ClassId> alternatives_;
    std::unordered_set<std::uint64_t> seen_;
};

struct SearchResult {
    Program program;
    std::size_t candidates = 0;  // programs profiled
    double best_seconds = 0;     // their fastest execution (0 when nothing was profiled)
    ExtractionTimes times;
};

// The program for `options.workloads`: the cost model's choice from
// `prices` (the e-nodes' at those workloads, ExtractionGraph::prices), then
// (with search_candidates > 1) the fastest profiled candidate. `extraction` is
// the saturated e-graph h's, shared by every search on it.
template <typename Runtime>
SearchResult search(const HlirEGraph& h, const ExtractionGraph& extraction, const std::vector<double>& prices, Runtime& rt,
                    const Graph& graph, const CompileOptions& options, int verbosity) {
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    SearchResult result;
    auto lowered = [&](const Choice& choice) {
        const auto start = Clock::now();
        Program p = lower(h.graph, h.ctx, choice, h.roots);
        result.times.lowering_seconds += seconds_since(start);
        return p;
    };
    const std::vector<Workload> workloads = costing_workloads(options.workloads, graph.dyn_map());
    auto start = Clock::now();
    CandidateGenerator candidates(h, extract_min_cost(h.graph, extraction, prices, h.roots), options.seed);
    result.times.choice_seconds = seconds_since(start);
    if (options.search_candidates <= 1 || !candidates.has_alternatives()) {
        result.program = lowered(candidates.base());
        return result;
    }
    start = Clock::now();
    auto out_of_time = [&] { return options.search_seconds > 0 && seconds_since(start) > options.search_seconds; };
    bool interactive = verbosity >= 1 && isatty(STDERR_FILENO);
    result.best_seconds = detail::profile(rt, lowered(candidates.base()), graph, workloads, true);
    result.candidates = 1;
    while (result.candidates < options.search_candidates && !out_of_time()) {
        std::optional<Choice> candidate = candidates.next();
        if (!candidate) break;
        double t;
        try {
            t = detail::profile(rt, lowered(*candidate), graph, workloads, false);
        } catch (const FatalError&) {
            throw;  // the runtime is unusable: no later candidate can be measured
        } catch (const Error&) {
            continue;  // a candidate the runtime rejects (e.g. an unsupported layout) is just not a winner
        }
        ++result.candidates;
        if (t < result.best_seconds) {
            result.best_seconds = t;
            candidates.set_base(std::move(*candidate));
        }
        if (interactive)
            std::fprintf(stderr, "\rsearch: %zu/%zu candidates, best %.3f ms   ", result.candidates,
                         options.search_candidates, result.best_seconds * 1e3);
    }
    if (interactive) std::fprintf(stderr, "\n");
    result.program = lowered(candidates.base());
    result.times.search_seconds = seconds_since(start) - result.times.lowering_seconds;
    return result;
}

}  // namespace luminal::egraph

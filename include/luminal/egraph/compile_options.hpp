#pragma once
// What Graph::compile may spend and show. Defaults: saturate within the
// runner's limits, take the cost model's program (no profiling), stay quiet.
#include <cstdint>
#include <string>

#include <vector>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/egraph/runner.hpp"

namespace luminal {

// Executions whose dims include `fixed` (a decode step: s = 1) get their own program.
struct Specialization {
    DynMap fixed;
    std::vector<Workload> workloads;
};

struct CompileOptions {
    std::size_t search_candidates = 1;  // programs to profile; 1 = the cost model's choice only
    double search_seconds = 0;          // wall-time budget for profiling; 0 = none
    std::uint64_t seed = 0;             // the same seed gives the same program
    // 0 quiet; 1 search progress and each phase's time (CompileTimes) on an
    // interactive stderr; 2 the phase times on any stderr, and the saturation report.
    // LUMINAL_VERBOSE=<n> in the environment overrides it.
    int verbosity = 1;
    // When set (or LUMINAL_DUMP=<dir>), compile writes report.txt, egraph.dot,
    // program.txt and program.dot there.
    std::string dump_dir;
    egraph::Limits saturation;
    // The shapes to price and profile candidates at, each weighted by how
    // often it runs (a model session: a decode step at a mid-size cache and a
    // prompt). Empty: the graph's dims as set, unset ones at 256.
    std::vector<Workload> workloads;
    // Programs for particular dims, each extracted (and searched) at its own
    // workloads from the same saturated e-graph, for runtimes that hold
    // several (Runtime::runs_specializations); others run the main program.
    std::vector<Specialization> specializations;
};

}  // namespace luminal

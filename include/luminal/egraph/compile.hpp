#pragma once
// Graph::compile: HLIR -> e-graph -> saturation (the runtime's Rules) ->
// search -> program -> runtime.load. Diagnostics on request (CompileOptions,
// LUMINAL_VERBOSE, LUMINAL_DUMP).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "luminal/egraph/dot.hpp"
#include "luminal/egraph/search.hpp"

namespace luminal {

namespace detail {
inline void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path);
    check(out.good(), "compile", "cannot write diagnostics file {}", path.string());
    out << text;
}
}  // namespace detail

// A runtime that holds a program's specializations and runs the one matching each execution's dims.
template <typename Runtime>
concept RunsSpecializations = requires { requires Runtime::runs_specializations; };

// What a compilation did: the saturation report, the search, each phase's time, the program.
struct CompileReport {
    egraph::RunReport saturation;
    std::size_t candidates = 0;   // programs profiled (0: the cost model decided alone)
    double best_seconds = 0;      // the fastest profiled execution
    double search_seconds = 0;    // wall time of extraction and search
    CompileTimes times;
    Program program;
};

// Graph::compile, also returning the report.
template <typename Runtime>
std::pair<Runtime, CompileReport> compile_with_report(const Graph& graph, Runtime runtime, const CompileOptions& options = {}) {
    int verbosity = options.verbosity;
    if (const char* v = std::getenv("LUMINAL_VERBOSE")) verbosity = std::atoi(v);
    std::string dump = options.dump_dir;
    if (const char* d = std::getenv("LUMINAL_DUMP"); d && dump.empty()) dump = d;

    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    CompileReport report;
    auto phase = Clock::now();
    egraph::HlirEGraph h;
    egraph::build_egraph(graph, h);
    report.times.build_seconds = seconds_since(phase);
    phase = Clock::now();
    report.saturation = egraph::saturate(h.graph, h.ctx, typename Runtime::Rules{}, options.saturation);
    report.times.saturation_seconds = seconds_since(phase);
    auto start = Clock::now();
    const egraph::ExtractionGraph extraction(h.graph, h.ctx);
    report.times.shared_seconds = seconds_since(start);
    // The options of each extraction: the main program's, then each specialization's.
    std::vector<CompileOptions> extractions{options};
    if constexpr (RunsSpecializations<Runtime>)
        for (const Specialization& special : options.specializations) {
            CompileOptions& at = extractions.emplace_back(options);
            at.workloads = special.workloads;
            for (Workload& w : at.workloads)
                for (auto [c, v] : special.fixed.entries()) w.dims.set(c, v);
        }
    phase = Clock::now();
    std::vector<std::vector<Workload>> workloads;
    for (const CompileOptions& at : extractions) workloads.push_back(costing_workloads(at.workloads, graph.dyn_map()));
    const std::vector<std::vector<double>> prices = extraction.prices(workloads, runtime.cost_model());
    report.times.costing_seconds = seconds_since(phase);
    egraph::SearchResult found = egraph::search(h, extraction, prices[0], runtime, graph, options, verbosity);
    found.program.carried = graph.carried();
    found.program.guards = graph.guards();
    report.times.extractions.push_back(std::move(found.times));
    if constexpr (RunsSpecializations<Runtime>)
        for (std::size_t i = 1; i < extractions.size(); ++i) {
            const Specialization& special = options.specializations[i - 1];
            egraph::SearchResult specialized = egraph::search(h, extraction, prices[i], runtime, graph, extractions[i], verbosity);
            specialized.program.carried = graph.carried();
            specialized.program.fixed_dims = special.fixed;
            found.program.specializations.push_back(std::move(specialized.program));
            found.candidates += specialized.candidates;
            report.times.extractions.push_back(std::move(specialized.times));
        }
    report.search_seconds = seconds_since(start);
    report.candidates = found.candidates;
    report.best_seconds = found.best_seconds;
    if (verbosity >= 2) std::fputs(report.saturation.to_string().c_str(), stderr);
    if (!dump.empty()) {
        std::filesystem::create_directories(dump);
        detail::write_file(std::filesystem::path(dump) / "report.txt", report.saturation.to_string());
        detail::write_file(std::filesystem::path(dump) / "egraph.dot", egraph::to_dot(h.graph, h.ctx));
        detail::write_file(std::filesystem::path(dump) / "program.txt", found.program.to_string());
        detail::write_file(std::filesystem::path(dump) / "program.dot", egraph::to_dot(found.program));
    }
    phase = Clock::now();
    runtime.load(found.program);  // a fresh load: no dummy data from profiling stays bound
    report.times.load_seconds = seconds_since(phase);
    if (verbosity >= 2 || (verbosity >= 1 && isatty(STDERR_FILENO))) std::fprintf(stderr, "%s\n", report.times.to_string().c_str());
    report.program = std::move(found.program);
    return {std::move(runtime), std::move(report)};
}

template <typename Runtime>
Runtime Graph::compile(Runtime runtime, const CompileOptions& options) const {
    return compile_with_report(*this, std::move(runtime), options).first;
}

template <typename Runtime>
Runtime Graph::compile(Runtime runtime) const {
    return compile(std::move(runtime), CompileOptions{});
}

}  // namespace luminal

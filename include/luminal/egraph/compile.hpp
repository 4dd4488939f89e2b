#pragma once
// Graph::compile: HLIR -> e-graph -> saturation (the runtime's Rules) ->
// search -> program -> runtime.load. Diagnostics on request (CompileOptions,
// LUMINAL_VERBOSE, LUMINAL_DUMP).
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

template <typename Runtime>
Runtime Graph::compile(Runtime runtime, const CompileOptions& options) const {
    int verbosity = options.verbosity;
    if (const char* v = std::getenv("LUMINAL_VERBOSE")) verbosity = std::atoi(v);
    std::string dump = options.dump_dir;
    if (const char* d = std::getenv("LUMINAL_DUMP"); d && dump.empty()) dump = d;

    egraph::HlirEGraph h;
    egraph::build_egraph(*this, h);
    egraph::RunReport report = egraph::saturate(h.graph, h.ctx, typename Runtime::Rules{}, options.saturation);
    egraph::SearchResult found = egraph::search(h, runtime, *this, options, verbosity);
    if (verbosity >= 2) std::fputs(report.to_string().c_str(), stderr);
    if (!dump.empty()) {
        std::filesystem::create_directories(dump);
        detail::write_file(std::filesystem::path(dump) / "report.txt", report.to_string());
        detail::write_file(std::filesystem::path(dump) / "egraph.dot", egraph::to_dot(h.graph, h.ctx));
        detail::write_file(std::filesystem::path(dump) / "program.txt", found.program.to_string());
        detail::write_file(std::filesystem::path(dump) / "program.dot", egraph::to_dot(found.program));
    }
    runtime.load(found.program);  // a fresh load: no dummy data from profiling stays bound
    return runtime;
}

}  // namespace luminal

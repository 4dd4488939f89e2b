// Compile time of the same graph at search budgets 1, 10 and 100 profiled
// candidates on the CpuRuntime (one small Llama-shaped layer, s = 16), with
// the execution time of the program each budget picks. Plain main.
#include <chrono>
#include <cstdio>

#include <luminal/luminal.hpp>

#include "llama_graph.hpp"

int main() {
    luminal_bench::Dims dims;
    dims.hidden = 256;
    dims.heads = 4;
    dims.kv_heads = 2;
    dims.head_dim = 64;
    dims.intermediate = 512;
    dims.vocab = 512;
    for (std::size_t budget : {1, 10, 100}) {
        luminal::Graph g;
        luminal_bench::build_llama(g, 1, dims);
        g.set_dim('s', 16);
        luminal::CompileOptions options;
        options.search_candidates = budget;
        options.verbosity = 0;
        auto start = std::chrono::steady_clock::now();
        auto [rt, report] = luminal::compile_with_report(g, luminal::CpuRuntime{}, options);
        double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        std::printf("budget=%zu compile_ms=%.1f saturate_ms=%.1f search_ms=%.1f profiled=%zu best_run_ms=%.3f\n", budget,
                    compile_ms, report.saturation.seconds * 1e3, report.search_seconds * 1e3, report.candidates,
                    report.best_seconds * 1e3);
    }
}

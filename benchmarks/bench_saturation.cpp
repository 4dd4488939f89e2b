// Saturation of a Llama-3-8B-shaped HLIR graph with the core and CPU rules at
// 1, 2, 4, ... 32 layers: e-classes, e-nodes, iterations and time per layer
// count (the curve should be near-linear in layers). Each layer count is
// saturated `reps` times from scratch; saturate_s is the median, min_s the
// fastest (the machine may be shared, so compare like with like).
// Plain main: prints one line per layer count.
//
//   bench_saturation [max_layers] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <luminal/luminal.hpp>
#include <luminal/cpu/cpu_rules.hpp>

#include "llama_graph.hpp"

namespace {

using Rules = luminal::egraph::concat_t<luminal::egraph::CoreRules, luminal::egraph::CpuRules>;

void saturate_layers(int layers, int reps) {
    luminal::Graph g;
    luminal_bench::build_llama(g, layers, luminal_bench::Dims{});
    std::vector<double> saturate_s, total_s;
    luminal::egraph::RunReport report;
    for (int r = 0; r < reps; ++r) {
        auto start = std::chrono::steady_clock::now();
        luminal::egraph::HlirEGraph h;
        luminal::egraph::build_egraph(g, h);
        luminal::egraph::Limits limits;
        limits.seconds = 60;
        report = luminal::egraph::saturate(h.graph, h.ctx, Rules{}, limits);
        total_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        saturate_s.push_back(report.seconds);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    std::printf("layers=%d hlir_nodes=%zu classes=%zu enodes=%zu iterations=%zu stop=%s saturate_s=%.4f min_s=%.4f "
                "total_s=%.4f\n",
                layers, g.size(), report.classes, report.nodes, report.iterations,
                std::string(luminal::egraph::name_of(report.stop)).c_str(), median(saturate_s),
                *std::min_element(saturate_s.begin(), saturate_s.end()), median(total_s));
    if (std::getenv("LUMINAL_VERBOSE")) std::fputs(report.to_string().c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
    int max_layers = argc > 1 ? std::atoi(argv[1]) : 32;
    int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
    for (int layers = 1; layers <= max_layers; layers *= 2) saturate_layers(layers, reps);
}

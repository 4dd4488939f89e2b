// Graph construction time of a Llama-3-8B-shaped transformer (32 layers, GQA,
// RoPE, RMSNorm, SwiGLU) with symbolic sequence length: the front end must stay
// far below a second. The peer is a plain loop appending the same number of
// nodes, which bounds what recording alone costs.
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include "llama_graph.hpp"
#include "ratio_main.hpp"

namespace {

using luminal_bench::build_llama;
using luminal_bench::Dims;

void BM_BuildLlama8B(benchmark::State& state) {
    std::size_t nodes = 0;
    for (auto _ : state) {
        luminal::Graph g;
        build_llama(g, static_cast<int>(state.range(0)), Dims{});
        nodes = g.size();
    }
    state.counters["nodes"] = static_cast<double>(nodes);
}

// Appends the same number of nodes with no shape work: the floor for recording.
void BM_AppendNodesOnly(benchmark::State& state) {
    luminal::Graph probe;
    build_llama(probe, static_cast<int>(state.range(0)), Dims{});
    for (auto _ : state) {
        luminal::Graph g;
        for (std::size_t i = 0; i < probe.size(); ++i) g.add_node(luminal::Op(luminal::OpKind::Constant), {}, {}, luminal::DType::F32);
        benchmark::DoNotOptimize(g.size());
    }
}

BENCHMARK(BM_BuildLlama8B)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AppendNodesOnly)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
    return luminal_bench::run_with_ratios(argc, argv, {{"BM_BuildLlama8B/32", "BM_AppendNodesOnly/32"}});
}

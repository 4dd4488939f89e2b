// Graph construction and compilation (saturation + extraction, no weights) of
// full-size model configs: Llama-3.1-8B, Qwen3-4B, Gemma-3-4B (the config.json
// fixtures in tests/data/configs). Prints the median of --reps runs of each.
//
//   bench_model_build [reps]
#include <luminal/luminal.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    const std::filesystem::path configs = std::filesystem::path(LUMINAL_SOURCE_DIR) / "tests" / "data" / "configs";
    std::printf("%-14s %8s %8s %12s %12s %10s\n", "model", "layers", "nodes", "build ms", "compile ms", "e-nodes");
    for (const char* name : {"llama31_8b", "qwen3_4b", "gemma3_4b_it"}) {
        const auto config = luminal::io::load_model_config(configs / name);
        std::vector<double> build_ms, compile_ms;
        std::size_t nodes = 0, enodes = 0;
        for (int r = 0; r < reps; ++r) {
            const auto start = Clock::now();
            luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, {.context = 4096});
            const auto built = Clock::now();
            model.graph->set_dim('s', 1);
            model.graph->set_dim('p', 0);
            luminal::CompileOptions options;
            options.verbosity = 0;
            auto [runtime, report] = luminal::compile_with_report(*model.graph, luminal::CpuRuntime{}, options);
            build_ms.push_back(std::chrono::duration<double, std::milli>(built - start).count());
            compile_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - built).count());
            nodes = model.graph->size();
            enodes = report.saturation.nodes;
        }
        std::printf("%-14s %8lld %8zu %12.1f %12.1f %10zu\n", name, static_cast<long long>(config.num_hidden_layers),
                    nodes, median(build_ms), median(compile_ms), enodes);
    }
}

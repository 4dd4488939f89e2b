// Graph construction and compilation (saturation + extraction, no weights) of
// full-size model configs: Llama-3.1-8B, Qwen3-4B, Gemma-3-4B (the config.json
// fixtures in tests/data/configs), or of the config.json folders given. Prints the
// median of `reps` runs of each, with the median of each compile phase
// (CompileTimes) and the size of the program chosen, and a `BENCH_RESULT {json}`
// line per model with every sample (read by scripts/bench.sh).
//
//   bench_model_build [--cuda] [reps] [config_dir...]
//
// The CPU runtime's compile, or with --cuda the CUDA plan's as `generate
// --plan-only --weights bf16 --context 2048` makes it (cuda::HostEmulator: no
// device; the prompt's program and the decode step's specialization): the
// session's construction, what generate prints as COMPILE.
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// One compile's wall time in ms and its report: the CPU runtime's, or the CUDA plan's.
std::pair<double, luminal::CompileReport> compile(luminal::nn::CausalLm& model, bool cuda) {
    const auto start = Clock::now();
    if (cuda) {
        luminal::nn::Session session(model, luminal::cuda::HostEmulator{});
        return {std::chrono::duration<double, std::milli>(Clock::now() - start).count(), session.report()};
    }
    model.graph->set_dim('s', 1);
    model.graph->set_dim('p', 0);
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto compiled = luminal::compile_with_report(*model.graph, luminal::CpuRuntime{}, options);
    return {std::chrono::duration<double, std::milli>(Clock::now() - start).count(), std::move(compiled.second)};
}

luminal::nn::ModelOptions model_options(bool cuda) {
    if (!cuda) return {.context = 4096};
    luminal::nn::ModelOptions o;
    o.context = 2048;
    o.weight_dtype = luminal::DType::BF16;
    o.narrow_activations = true;
    o.last_logits_only = true;
    o.kv_dtype = luminal::DType::BF16;
    o.sample_in_graph = true;
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    const bool cuda = argc > 1 && std::string_view(argv[1]) == "--cuda";
    if (cuda) --argc, ++argv;
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    const std::filesystem::path fixtures = std::filesystem::path(LUMINAL_SOURCE_DIR) / "tests" / "data" / "configs";
    std::vector<std::filesystem::path> configs(argv + std::min(argc, 2), argv + argc);
    if (configs.empty())
        for (const char* name : {"llama31_8b", "qwen3_4b", "gemma3_4b_it"}) configs.push_back(fixtures / name);
    std::printf("%-14s %8s %8s %12s %12s %10s %9s | phases, median ms: %s\n", "model", "layers", "nodes", "build ms",
                "compile ms", "e-nodes", "program", "e-graph saturate shared costing choice lowering load");
    for (const std::filesystem::path& dir : configs) {
        const std::string name = dir.filename().string();
        const auto config = luminal::io::load_model_config(dir);
        std::vector<double> build_ms, compile_ms;
        std::map<std::string, std::vector<double>> phase_ms;
        std::size_t nodes = 0, enodes = 0, program_nodes = 0;
        for (int r = 0; r < reps; ++r) {
            const auto start = Clock::now();
            luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, model_options(cuda));
            build_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
            const auto [ms, report] = compile(model, cuda);
            compile_ms.push_back(ms);
            nodes = model.graph->size();
            enodes = report.saturation.nodes;
            program_nodes = report.program.nodes.size();
            const luminal::CompileTimes& t = report.times;
            double choice = 0, lowering = 0;  // over the main program and its specializations
            for (const luminal::ExtractionTimes& e : t.extractions) choice += e.choice_seconds, lowering += e.lowering_seconds;
            phase_ms["egraph_build"].push_back(t.build_seconds * 1e3);
            phase_ms["saturation"].push_back(t.saturation_seconds * 1e3);
            phase_ms["extraction_graph"].push_back(t.shared_seconds * 1e3);
            phase_ms["costing"].push_back(t.costing_seconds * 1e3);
            phase_ms["choice"].push_back(choice * 1e3);
            phase_ms["lowering"].push_back(lowering * 1e3);
            phase_ms["load"].push_back(t.load_seconds * 1e3);
        }
        std::printf("%-14s %8lld %8zu %12.1f %12.1f %10zu %9zu |", name.c_str(),
                    static_cast<long long>(config.num_hidden_layers), nodes, median(build_ms), median(compile_ms),
                    enodes, program_nodes);
        luminal::io::Json phases = luminal::io::Json::object();
        for (const char* phase : {"egraph_build", "saturation", "extraction_graph", "costing", "choice", "lowering", "load"}) {
            std::printf(" %.1f", median(phase_ms[phase]));
            phases[phase] = median(phase_ms[phase]);
        }
        std::printf("\n");
        const luminal::io::Json result = {
            {"path", cuda ? "ours-compile-cuda" : "ours-compile"}, {"model", name}, {"device", cuda ? "cuda" : "cpu"}, {"iters", reps},
            {"compile_ms", median(compile_ms)}, {"compile_ms_samples", compile_ms}, {"build_ms_samples", build_ms},
            {"graph_nodes", nodes}, {"egraph_nodes", enodes}, {"program_nodes", program_nodes}, {"phases_ms", phases}};
        std::printf("BENCH_RESULT %s\n", result.dump().c_str());
    }
}

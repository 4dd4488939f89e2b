// CPU time to first token and decode speed of a model directory through the
// CpuRuntime, on a fixed prompt of token ids (no tokenizer needed), printed as
// one JSON line for tools/cpu_vs_torch.py, which runs PyTorch eager on the
// same weights next to it.
//
//   bench_llm_cpu DIR [prompt_tokens=128] [decode_tokens=16] [iters=3] [threads=0: all]
// TTFT: median over iters of one batched prefill (logits of every prompt
// position). Decode: greedy steps after one warm-up step, median step time.
#include <luminal/luminal.hpp>
#include <luminal/nn/sampling.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_llm_cpu DIR [prompt_tokens] [decode_tokens] [iters] [threads]\n");
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    const int prompt_tokens = argc > 2 ? std::atoi(argv[2]) : 128;
    const int decode_tokens = argc > 3 ? std::atoi(argv[3]) : 16;
    const int iters = argc > 4 ? std::atoi(argv[4]) : 3;
    const std::size_t threads = argc > 5 ? static_cast<std::size_t>(std::atoi(argv[5])) : 0;
    try {
        const auto config = luminal::io::load_model_config(dir);
        const auto weights = luminal::io::SafetensorsModel::open(dir);
        const auto compile_start = Clock::now();
        luminal::nn::CausalLm model =
            luminal::nn::build_causal_lm(config, {.context = prompt_tokens + decode_tokens + 2});
        luminal::CompileOptions options;
        options.verbosity = 0;
        luminal::nn::Session session(model, luminal::CpuRuntime(luminal::CpuOptions{.threads = threads}), options);
        const double compile_ms = ms_since(compile_start);
        session.load_weights(weights);

        // The same ids tools/cpu_vs_torch.py feeds PyTorch.
        std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_tokens));
        for (int i = 0; i < prompt_tokens; ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % config.vocab_size);
        const auto vocab = static_cast<std::size_t>(config.vocab_size);

        std::vector<double> ttft;
        std::int32_t token = 0;
        for (int i = 0; i < iters; ++i) {
            session.reset();
            const auto start = Clock::now();
            const auto logits = session.forward(prompt);
            token = luminal::nn::Sampler::argmax(std::span(logits).subspan((prompt.size() - 1) * vocab, vocab));
            ttft.push_back(ms_since(start));
        }
        std::vector<double> steps;
        std::vector<std::int32_t> generated{token};
        for (int i = 0; i <= decode_tokens; ++i) {
            const auto start = Clock::now();
            token = luminal::nn::Sampler::argmax(session.forward(std::vector<std::int32_t>{token}));
            if (i > 0) steps.push_back(ms_since(start));  // step 0 warms up
            generated.push_back(token);
        }
        const luminal::io::Json out = {{"compile_ms", compile_ms}, {"ttft_ms", median(ttft)},
                                       {"ttft_ms_samples", ttft}, {"tpot_ms", median(steps)},
                                       {"decode_tps", 1000.0 / median(steps)}, {"generated", generated}};
        std::printf("%s\n", out.dump().c_str());
    } catch (const luminal::Error& error) {
        std::fprintf(stderr, "bench_llm_cpu: %s\n", error.what());
        return 1;
    }
}

// Text generation with any bundled family from a Hugging Face model directory
// (config.json, model.safetensors or its index, tokenizer.json) or a single
// GGUF file: batched prefill of the prompt, then token-by-token decode through
// the KV cache, with the text streamed to stdout and the benchmark lines after it
// (scripts/bench.sh runs it with --prompt-ids, so every engine gets the same ids):
//   COMPILE: X ms       graph construction + compilation/search (weights not included)
//   NVRTC: X ms, ...    (CUDA) the kernels' builds and disk cache reads: inside COMPILE in a run,
//                       after it with --plan-only (its report builds them)
//   LOAD: X ms          opening the model files and binding the weights to the runtime
//   Prompt: N tokens
//   TTFT: X ms          median over --iters of: prefill forward + first token pick
//   TPOT: X ms          mean decode step, after one warm-up step
//   RSS: X MB           resident memory after loading, after generating, and its peak (VmRSS, VmHWM)
//   BENCH_RESULT {...}  the same numbers as JSON, with the prompt and generated ids
// A GGUF file's Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q6_K matrices stay in their blocks,
// on the CPU and on CUDA (--dequantize: f32 at load instead); --activations f32
// keeps their products exact. --quant q4_k_m keeps a planned model's or a
// random model's matrices in llama.cpp's Q4_K_M mix of formats. --random-weights runs a model
// directory's config.json with seeded random weights (no weights file, no
// tokenizer: give --prompt-tokens or --prompt-ids); --profile FILE (CUDA) times
// every launch of one decode step and of the prompt's prefill, beside the plan
// report's model of each, and writes both as JSON.
#include <CLI/CLI.hpp>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <luminal/cuda/plan_report.hpp>
#include <luminal/cuda/step_transfers.hpp>
#include <luminal/nn/random_checkpoint.hpp>
#include <luminal/nn/sampling.hpp>
#include <luminal/nn/step_floor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <string_view>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A /proc/self/status field (VmRSS, VmHWM) in MB; 0 where there is none.
double status_mb(const std::string& field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
    return 0;
}

struct Args {
    std::filesystem::path model;
    std::string prompt = "Explain what a neural network is in a paragraph.";
    std::vector<std::int32_t> prompt_ids;
    std::int64_t prompt_tokens = 0;  // > 0: a seeded random prompt of this many ids
    bool random_weights = false;
    std::filesystem::path profile;  // --profile: where the per-launch times go
    int max_tokens = 32;
    std::size_t search = 1;
    double temperature = 0;
    std::int64_t top_k = 0;
    std::uint64_t seed = 0;
    int iters = 1;
    std::int64_t context = 512;
    bool chat = false;
    bool ignore_eos = false;
    bool raw_ids = false;
    luminal::DType weights = luminal::DType::F32;
    std::optional<luminal::DType> kv_dtype;  // unset: bf16 on CUDA, f16 on the CPU (as llama.cpp)
    std::string device = "cpu";
    std::size_t threads = 0;
    bool dequantize = false;
    bool q8_activations = true;
    std::optional<bool> narrow_activations;  // unset: on CUDA, off on the CPU
    bool plan_only = false;
    std::string quant;  // --plan-only or --random-weights: the formats matrices are kept in; empty: none
    std::int64_t cached = -1;  // -1: half the context
    std::int64_t new_tokens = 1;
    double bandwidth = luminal::cuda::DeviceSpec{}.bandwidth;
    int multiprocessors = luminal::cuda::DeviceSpec{}.multiprocessors;
    std::optional<std::uint64_t> max_memory;
};

// "8G", "512M", "1.5GiB", "100000" (bytes) as bytes; K, M, G, T are powers of 1024.
std::uint64_t parse_bytes(const std::string& text) {
    std::size_t end = 0;
    double value = 0;
    try {
        value = std::stod(text, &end);
    } catch (const std::exception&) {
        end = 0;
    }
    std::string unit = text.substr(end);
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
    const std::map<std::string, double> scale{{"", 1.0}, {"B", 1.0}, {"K", 0x1p10}, {"KB", 0x1p10}, {"KIB", 0x1p10},
                                              {"M", 0x1p20}, {"MB", 0x1p20}, {"MIB", 0x1p20}, {"G", 0x1p30},
                                              {"GB", 0x1p30}, {"GIB", 0x1p30}, {"T", 0x1p40}, {"TB", 0x1p40},
                                              {"TIB", 0x1p40}};
    const auto it = scale.find(unit);
    luminal::check(end > 0 && value > 0 && it != scale.end(), "generate", "--max-memory {}: expected a size such as "
                   "8G, 512M or a number of bytes", text);
    return static_cast<std::uint64_t>(value * it->second);
}

// The config of a model directory (config.json is enough) or a GGUF file.
luminal::io::ModelConfig config_of(const std::filesystem::path& model) {
    if (std::filesystem::is_directory(model)) return luminal::io::load_model_config(model);
    return luminal::io::gguf_model_config(luminal::io::GgufFile::open(model).view());
}

luminal::DType kv_dtype_of(const Args& args) {
    return args.kv_dtype.value_or(args.device == "cuda" ? luminal::DType::BF16 : luminal::DType::F16);
}

// A GPU multiplies 16-bit weights on its tensor cores only with 16-bit
// activations; the CPU keeps them exact.
bool narrow_activations_of(const Args& args) { return args.narrow_activations.value_or(args.device == "cuda"); }

// Whether llama.cpp's Q4_K_M gives layer i of n its larger format (the first and
// last eighth of the layers, and every third between).
bool more_bits(std::int64_t i, std::int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The format --quant gives matrix `name`: "q4_k_m" is llama.cpp's mix (Q6_K for
// the LM head and for v_proj and down_proj in more_bits layers, Q4_K elsewhere); a
// format name (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q6_k) is that format for every matrix.
luminal::QuantFormat plan_format(const std::string& mix, const std::string& name, std::int64_t layers) {
    using luminal::QuantFormat;
    if (mix != "q4_k_m") {
        for (QuantFormat f : luminal::kBlockQuantized) {
            std::string lower(luminal::io::name_of(f));
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
            if (lower == mix) return f;
        }
        throw luminal::Error("generate", fmt::format("--quant {}: expected q4_k_m or a kept block format "
                                                     "(q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q6_k)", mix));
    }
    if (name == "lm_head.weight") return QuantFormat::Q6_K;
    const std::string prefix = "model.layers.";
    if (name.starts_with(prefix) && (name.ends_with("v_proj.weight") || name.ends_with("down_proj.weight")))
        if (more_bits(std::stoll(name.substr(prefix.size())), layers)) return QuantFormat::Q6_K;
    return QuantFormat::Q4_K;
}

// The plan report of `session`'s program for a step of `new_tokens` tokens after
// `cached` ones: every launch with its modelled time, against the memory floor.
template <typename Runtime>
luminal::cuda::PlanReport report_of(const luminal::nn::Session<Runtime>& session, const luminal::nn::CausalLm& model,
                                    const Args& args, std::int64_t cached, std::int64_t new_tokens) {
    luminal::DynMap dims;
    dims.set('s', new_tokens);
    dims.set('p', cached);
    luminal::cuda::PlanReportOptions report_options;
    report_options.device.bandwidth = args.bandwidth;
    report_options.device.multiprocessors = args.multiprocessors;
    report_options.layers = static_cast<std::int64_t>(model.config.layers.size());
    report_options.floor_bytes = luminal::nn::step_floor_bytes(model, cached, new_tokens);
    report_options.floor_flops = luminal::nn::step_floor_flops(model, cached, new_tokens);
    // A step after the one before it: the new tokens' ids go up, the id the graph picks comes back.
    luminal::DynMap previous;
    previous.set('s', new_tokens);
    previous.set('p', std::max<std::int64_t>(cached - new_tokens, 0));
    const auto ids_bytes = static_cast<std::size_t>(new_tokens) * sizeof(std::int32_t);
    report_options.host_device_bytes =
        static_cast<double>(luminal::cuda::step_transfer_bytes(previous, dims, ids_bytes, sizeof(std::int32_t)));
    return luminal::cuda::plan_report(session.report().program.for_dims(dims), dims, report_options);
}

// The block format of each matrix under `mix` (--quant; empty: none).
std::map<std::string, luminal::QuantFormat, std::less<>> quantized_formats(const luminal::io::ModelConfig& config,
                                                                          const luminal::nn::ModelOptions& model_options,
                                                                          const std::string& mix) {
    std::map<std::string, luminal::QuantFormat, std::less<>> formats;
    if (mix.empty()) return formats;
    const auto layers = static_cast<std::int64_t>(config.layers.size());
    const luminal::nn::CausalLm unquantized = luminal::nn::build_causal_lm(config, model_options);
    for (const luminal::nn::Parameter& p : unquantized.parameters.parameters()) {
        // A matrix, or the matrices a parameter stacks (a mixture's experts), each in its own format.
        if (p.shape.size() != (p.stacked.empty() ? 2u : 3u) || !p.computed.empty()) continue;
        for (const std::string& name : p.stacked.empty() ? std::vector<std::string>{p.name} : p.stacked) {
            const luminal::QuantFormat f = plan_format(mix, name, layers);
            if (p.shape.back() % luminal::block_elements(f) == 0) formats.emplace(name, f);
        }
    }
    return formats;
}

// The NVRTC line: the kernels' builds, apart from COMPILE's figure (a plan's
// report builds them after COMPILE; a CUDA run's load, inside it).
void print_nvrtc() {
    if (!luminal::cuda::Nvrtc::available()) return;
    const luminal::cuda::Nvrtc& nvrtc = luminal::cuda::Nvrtc::get();
    std::printf("NVRTC: %.2f ms, %zu kernels built, %zu from the disk cache\n", nvrtc.seconds() * 1e3, nvrtc.compiled(),
                nvrtc.from_disk());
}

// --plan-only: compiles the model for the CUDA backend, without a device or
// weights, and prints the launches of one step of --new-tokens tokens after
// --cached ones with their modelled cost against the memory floor.
int plan(const Args& args) {
    const luminal::io::ModelConfig config = config_of(args.model);
    luminal::nn::ModelOptions model_options;
    model_options.context = args.context;
    model_options.weight_dtype = args.weights;
    model_options.last_logits_only = true;
    model_options.kv_dtype = kv_dtype_of(args);
    model_options.sample_in_graph = true;
    model_options.q8_activations = args.q8_activations;
    model_options.narrow_activations = args.narrow_activations.value_or(true);  // the plan is a GPU's
    model_options.quantized = quantized_formats(config, model_options, args.quant);
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, model_options);
    double weight_bytes = 0;
    for (const luminal::nn::Parameter& p : model.parameters.parameters()) weight_bytes += luminal::nn::tensor_bytes(p.tensor);
    std::printf("WEIGHTS: %.0f bytes on the device (%zu matrices kept as blocks)\n", weight_bytes, model_options.quantized.size());
    const std::int64_t cached = args.cached >= 0 ? args.cached : args.context / 2;
    luminal::check(cached + args.new_tokens <= args.context, "generate", "--cached {} + --new-tokens {} exceed --context {}",
                   cached, args.new_tokens, args.context);
    luminal::CompileOptions options;
    options.search_candidates = args.search;
    options.seed = args.seed;
    // A step of several tokens is planned as a program chosen for it; a decode step as generate runs it.
    if (args.new_tokens > 1) {
        luminal::DynMap dims;
        dims.set('s', args.new_tokens);
        dims.set('p', cached);
        options.workloads = {{dims, 1}};
    }
    const auto compile_start = Clock::now();
    luminal::nn::Session session(model, luminal::cuda::HostEmulator{}, options);
    const double compile_ms = ms_since(compile_start);
    std::printf("%s", report_of(session, model, args, cached, args.new_tokens).to_string().c_str());
    std::printf("COMPILE: %.2f ms\n", compile_ms);
    print_nvrtc();
    return 0;
}

// CPU threads the runtime computes on (0 for a device runtime).
template <typename Runtime>
std::size_t threads_of(const Runtime& runtime) {
    if constexpr (requires { runtime.threads(); }) return runtime.threads();
    else return 0;
}

// The vector instructions a CPU runtime's kernels use ("" for a device runtime).
template <typename Runtime>
std::string isa_of(const Runtime& runtime) {
    if constexpr (requires { runtime.isa(); }) return luminal::cpu::quant::name_of(runtime.isa());
    else return "";
}

// --profile: runs `tokens` after the session's `cached` tokens with each launch
// timed on the device, and pairs each launch with the plan report's row for it.
luminal::io::Json profile_step(luminal::nn::Session<luminal::cuda::CudaRuntime>& session, const luminal::nn::CausalLm& model,
                               const Args& args, std::string_view name, std::span<const std::int32_t> tokens) {
    const std::int64_t cached = session.position();
    const luminal::cuda::PlanReport report = report_of(session, model, args, cached, static_cast<std::int64_t>(tokens.size()));
    session.runtime().time_next_launches();
    session.next(tokens);
    const auto& times = session.runtime().launch_times();
    const bool paired = times.size() == report.rows.size() &&
                        std::equal(times.begin(), times.end(), report.rows.begin(),
                                   [](const auto& t, const auto& r) { return std::cmp_equal(t.node, r.launch.node); });
    std::printf("PROFILE %.*s: %zu tokens after %lld, %zu launches timed, %zu in the plan report%s\n",
                static_cast<int>(name.size()), name.data(), tokens.size(), static_cast<long long>(cached), times.size(),
                report.rows.size(), paired ? "" : " (the lists differ: rows unpaired)");
    std::printf("%4s %6s %-22s %-40s %10s %10s %7s\n", "#", "node", "kernel", "op", "model us", "device us", "ratio");
    luminal::io::Json launches = luminal::io::Json::array();
    double measured = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
        measured += times[i].seconds;
        luminal::io::Json row = {{"index", i}, {"node", times[i].node}, {"kind", times[i].kind}, {"device_us", times[i].seconds * 1e6}};
        if (paired) {
            const luminal::cuda::PlanReportRow& r = report.rows[i];
            row.update({{"kernel", r.kernel}, {"op", r.op}, {"grid", r.launch.grid}, {"block", r.launch.block},
                        {"registers", r.registers ? *r.registers : -1}, {"bytes", r.work.bytes()},
                        {"flops", r.work.flops + r.work.mma_flops}, {"model_us", r.estimate.seconds * 1e6}});
            std::printf("%4zu %6d %-22s %-40s %10.2f %10.2f %7.2f\n", i, times[i].node, r.kernel.c_str(), r.op.substr(0, 40).c_str(),
                        r.estimate.seconds * 1e6, times[i].seconds * 1e6,
                        r.estimate.seconds > 0 ? times[i].seconds / r.estimate.seconds : 0.0);
        }
        launches.push_back(std::move(row));
    }
    std::printf("PROFILE %.*s total: device %.1f us (launches one by one, no graph), model %.1f us, floor %.1f us\n",
                static_cast<int>(name.size()), name.data(), measured * 1e6, report.modelled_seconds * 1e6, report.floor_seconds() * 1e6);
    return {{"step", name}, {"new_tokens", tokens.size()}, {"cached", cached}, {"paired", paired},
            {"device_us", measured * 1e6}, {"plan", report.totals()}, {"launches", std::move(launches)}};
}

template <typename Runtime>
int run(const Args& args, Runtime runtime) {
    const auto load_start = Clock::now();
    std::optional<luminal::nn::PretrainedModel> pretrained;
    if (!args.random_weights) pretrained.emplace(luminal::nn::PretrainedModel::open(args.model));
    const luminal::io::ModelConfig config = pretrained ? pretrained->config() : config_of(args.model);
    const luminal::io::Tokenizer* tokenizer = pretrained ? &pretrained->tokenizer() : nullptr;
    double load_ms = ms_since(load_start);

    const auto compile_start = Clock::now();
    luminal::nn::ModelOptions model_options;
    model_options.context = args.context;
    model_options.weight_dtype = args.weights;
    model_options.q8_activations = args.q8_activations;
    model_options.narrow_activations = narrow_activations_of(args);
    if (pretrained && !args.dequantize) model_options.quantized = pretrained->quantized_weights();
    else model_options.quantized = quantized_formats(config, model_options, args.quant);
    model_options.last_logits_only = true;  // the sampler reads the last position only
    model_options.kv_dtype = kv_dtype_of(args);
    model_options.sample_in_graph = args.device == "cuda";  // only the token's id comes back from the device
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, model_options);
    luminal::CompileOptions options;
    options.search_candidates = args.search;
    options.seed = args.seed;
    luminal::nn::Session session(model, std::move(runtime), options, luminal::nn::MemoryLimit{args.max_memory});
    const double compile_ms = ms_since(compile_start);

    const auto bind_start = Clock::now();
    if (pretrained) session.load_weights(*pretrained);
    else session.load_weights(luminal::nn::RandomCheckpoint(model.parameters, args.seed));
    load_ms += ms_since(bind_start);
    const double rss_after_load_mb = status_mb("VmRSS");

    std::vector<std::int32_t> prompt = args.prompt_ids;
    if (args.prompt_tokens > 0) {
        std::mt19937_64 ids(args.seed);
        std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(config.vocab_size - 1));
        for (std::int64_t i = 0; i < args.prompt_tokens; ++i) prompt.push_back(id(ids));
    }
    const std::vector<luminal::io::ChatMessage> messages{{"user", args.prompt}};
    if (prompt.empty()) {
        luminal::check(tokenizer != nullptr, "generate", "--random-weights has no tokenizer: give --prompt-tokens or --prompt-ids");
        prompt = tokenizer->encode(args.chat ? render_chat(pretrained->chat_family(), messages) : args.prompt, !args.chat);
    }
    luminal::check(!prompt.empty(), "generate", "the prompt encodes to no tokens");
    for (const std::int32_t id : prompt)
        luminal::check(id >= 0 && id < config.vocab_size, "generate",
                       "prompt id {} is outside the vocabulary (size {})", id, config.vocab_size);
    const auto vocab = static_cast<std::size_t>(config.vocab_size);
    std::vector<std::int32_t> stops(config.eos_token_ids.begin(), config.eos_token_ids.end());
    if (tokenizer)
        if (auto eos = tokenizer->eos_id()) stops.push_back(*eos);
    if (args.chat)
        for (const std::string& name : luminal::io::chat_stop_tokens(pretrained->chat_family()))
            if (auto id = tokenizer->token_to_id(name)) stops.push_back(*id);

    // A padded vocabulary has ids without text: picked only with --raw-ids (or without a tokenizer).
    const std::vector<bool> pickable =
        args.raw_ids || !tokenizer ? std::vector<bool>{} : luminal::nn::decodable_ids(*tokenizer, config.vocab_size);

    if (model.sampling) session.set_sampling(args.temperature, args.top_k, args.seed, pickable);
    std::vector<double> ttft_samples;
    std::int32_t token = 0;
    for (int i = 0; i < args.iters; ++i) {
        session.reset();
        luminal::nn::Sampler sampler(args.temperature, args.top_k, args.seed, pickable);
        const auto start = Clock::now();
        if (model.sampling) {
            token = session.next(prompt);
        } else {
            const std::vector<float> logits = session.forward(prompt);
            token = sampler(std::span(logits).subspan(logits.size() - vocab, vocab));
        }
        ttft_samples.push_back(ms_since(start));
    }

    std::printf(args.chat ? "> %s\n" : "%s", args.prompt_ids.empty() && tokenizer ? args.prompt.c_str() : "");
    std::optional<luminal::io::StreamingDecoder> stream;
    if (tokenizer) stream.emplace(*tokenizer, true);
    const auto show = [&](std::int32_t id) {
        std::fputs(stream ? stream->step(id).c_str() : fmt::format(" {}", id).c_str(), stdout);
        std::fflush(stdout);
    };
    luminal::nn::Sampler sampler(args.temperature, args.top_k, args.seed + 1, pickable);
    std::vector<double> tpot_samples;
    std::vector<std::int32_t> generated_ids{token};
    show(token);
    while (std::cmp_less(generated_ids.size(), args.max_tokens) && session.position() < args.context &&
           (args.ignore_eos || std::find(stops.begin(), stops.end(), token) == stops.end())) {
        const auto start = Clock::now();
        const std::vector<std::int32_t> next{token};
        token = model.sampling ? session.next(next) : sampler(session.forward(next));
        const double step_ms = ms_since(start);
        if (generated_ids.size() > 1) tpot_samples.push_back(step_ms);  // the first decode step warms up
        generated_ids.push_back(token);
        show(token);
    }
    std::printf("%s\n\n", stream ? stream->finish().c_str() : "");

    const double ttft = median(ttft_samples);
    double tpot = 0;
    for (double t : tpot_samples) tpot += t / static_cast<double>(tpot_samples.size());
    std::printf("COMPILE: %.2f ms\n", compile_ms);
    if (args.device == "cuda") print_nvrtc();
    std::printf("LOAD: %.2f ms\n", load_ms);
    std::printf("Prompt: %zu tokens\n", prompt.size());
    std::printf("TTFT: %.2f ms\n", ttft);
    std::printf("TPOT: %.2f ms\n", tpot);
    const double rss_end_mb = status_mb("VmRSS"), rss_peak_mb = status_mb("VmHWM");
    std::printf("RSS: %.1f MB after load, %.1f MB after generating, %.1f MB peak\n", rss_after_load_mb, rss_end_mb,
                rss_peak_mb);
    const luminal::io::Json result = {
        {"path", "cpp"}, {"model", args.model.filename().string()}, {"device", args.device},
        {"dtype", args.weights == luminal::DType::F32 ? std::string("float32")
                  : model_options.narrow_activations
                      ? fmt::format("{} weights and product inputs, float32 accumulation", luminal::name_of(args.weights))
                      : fmt::format("{} weights, float32 compute", luminal::name_of(args.weights))},
        {"random_weights", args.random_weights},
        {"prompt_tokens", prompt.size()}, {"iters", args.iters}, {"ttft_ms", ttft},
        {"ttft_ms_samples", ttft_samples}, {"compile_ms", compile_ms}, {"load_ms", load_ms},
        {"search_iters", args.search},
        {"decode_tokens", tpot_samples.size()}, {"tpot_ms", tpot}, {"tpot_ms_samples", tpot_samples},
        {"throughput_tps", tpot > 0 ? 1000.0 / tpot : 0.0}, {"prompt_ids", prompt},
        {"generated_ids", generated_ids}, {"threads", threads_of(session.runtime())},
        {"isa", isa_of(session.runtime())},
        {"quantized_matrices", model_options.quantized.size()}, {"q8_activations", args.q8_activations},
        {"kv_dtype", luminal::name_of(model_options.kv_dtype)}, {"sampled_in_graph", model_options.sample_in_graph},
        {"rss_after_load_mb", rss_after_load_mb}, {"rss_end_mb", rss_end_mb}, {"rss_peak_mb", rss_peak_mb}};
    std::printf("BENCH_RESULT %s\n", result.dump().c_str());

    if constexpr (std::is_same_v<Runtime, luminal::cuda::CudaRuntime>) {
        if (!args.profile.empty()) {
            luminal::io::Json steps = luminal::io::Json::array();
            steps.push_back(profile_step(session, model, args, "decode", std::vector<std::int32_t>{token}));
            session.reset();
            steps.push_back(profile_step(session, model, args, "prefill", prompt));
            std::ofstream(args.profile) << luminal::io::Json{{"device", session.runtime().device_name()}, {"steps", steps}}.dump(1);
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Generate text with a Llama 3, Qwen3, Qwen3-MoE, Gemma 3 or Gemma 4 model on the CPU or a CUDA GPU"};
    Args args;
    app.add_option("--model", args.model, "Hugging Face model directory (config.json alone for --plan-only) or .gguf file")
        ->required()
        ->check(CLI::ExistingPath);
    auto* prompt_text = app.add_option("--prompt", args.prompt, "prompt text");
    auto* prompt_ids = app.add_option("--prompt-ids", args.prompt_ids,
                   "prompt as token ids, comma-separated, used as given (benchmarks feed every engine the same ids)")
        ->delimiter(',')
        ->excludes(prompt_text);
    app.add_option("--prompt-tokens", args.prompt_tokens, "a prompt of this many seeded random ids (--seed)")
        ->check(CLI::PositiveNumber)
        ->excludes(prompt_text)
        ->excludes(prompt_ids);
    app.add_flag("--random-weights", args.random_weights,
                 "seeded random weights (--seed) for the model directory's config.json: no weights file or tokenizer");
    app.add_option("--profile", args.profile,
                   "--device cuda: time each launch of one decode step and of the prompt's prefill beside the plan "
                   "report's model of it, written to this JSON file");
    app.add_option("--max-tokens", args.max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
    app.add_option("--search", args.search, "candidate programs to profile (1: the cost model decides)")
        ->check(CLI::PositiveNumber);
    app.add_option("--temperature", args.temperature, "0: greedy")->check(CLI::NonNegativeNumber);
    app.add_option("--top-k", args.top_k, "sample among the k best tokens (0: all)")->check(CLI::NonNegativeNumber);
    app.add_option("--seed", args.seed, "sampling and search seed");
    app.add_option("--iters", args.iters, "prefill repetitions for the TTFT median")->check(CLI::PositiveNumber);
    app.add_option("--context", args.context, "KV cache size in tokens")->check(CLI::PositiveNumber);
    app.add_flag("--chat", args.chat, "wrap the prompt in the family's chat template")->excludes(prompt_ids);
    app.add_flag("--ignore-eos", args.ignore_eos, "keep generating past end-of-sequence tokens");
    app.add_flag("--raw-ids", args.raw_ids,
                 "let the sampler pick ids the tokenizer has no token for (a padded vocabulary; they print nothing)");
    const std::map<std::string, luminal::DType> weight_dtypes{
        {"f32", luminal::DType::F32}, {"f16", luminal::DType::F16}, {"bf16", luminal::DType::BF16}};
    app.add_option("--weights", args.weights, "dtype the weight matrices are kept in (f16/bf16: widened to f32 unless "
                   "--narrow-activations)")
        ->transform(CLI::CheckedTransformer(weight_dtypes, CLI::ignore_case));
    app.add_option("--kv-dtype", args.kv_dtype, "dtype of the KV cache (default: bf16 on cuda, f16 on cpu)")
        ->transform(CLI::CheckedTransformer(weight_dtypes, CLI::ignore_case));
    app.add_option("--device", args.device, "cpu, or cuda (the GPU's driver is loaded at run time)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_option("--threads", args.threads, "CPU threads (0: the machine's hardware threads)");
    app.add_flag("--dequantize", args.dequantize, "dequantize a GGUF file's quantized matrices at load");
    const std::map<std::string, bool> activation_kinds{{"q8", true}, {"f32", false}};
    app.add_option("--activations", args.q8_activations,
                   "q8: products with quantized weights round activations to 8-bit blocks (as llama.cpp); f32: exact")
        ->transform(CLI::CheckedTransformer(activation_kinds, CLI::ignore_case));
    app.add_option("--narrow-activations", args.narrow_activations,
                   "products with f16/bf16 weights round their activations to that dtype first, as transformers' 16-bit "
                   "run does, so a GPU multiplies them on tensor cores (default: on with --device cuda, off on cpu)");
    app.add_flag("--plan-only", args.plan_only,
                 "print the CUDA plan of one step (launches, bytes, modelled time against the memory floor); "
                 "needs no GPU and no weights");
    app.add_option("--quant", args.quant,
                   "--plan-only or --random-weights: keep the matrices quantized, as llama.cpp's q4_k_m mix or one "
                   "format (q8_0, q4_k, ...)");
    app.add_option("--cached", args.cached, "--plan-only: tokens already in the KV cache (default: half the context)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--new-tokens", args.new_tokens, "--plan-only: tokens of the planned step")->check(CLI::PositiveNumber);
    app.add_option("--bandwidth", args.bandwidth, "--plan-only: DRAM bytes/s the floor and the cost model assume")
        ->check(CLI::PositiveNumber);
    app.add_option("--sms", args.multiprocessors, "--plan-only: the GPU's multiprocessors")->check(CLI::PositiveNumber);
    std::string max_memory;
    app.add_option("--max-memory", max_memory,
                   "most memory to use, e.g. 8G or 512M (default: what the machine has available)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (!max_memory.empty()) args.max_memory = parse_bytes(max_memory);
        if (args.plan_only) {
            luminal::check(args.device == "cuda", "generate", "--plan-only plans for the CUDA backend: add --device cuda");
            return plan(args);
        }
        luminal::check(args.quant.empty() || args.plan_only || args.random_weights, "generate",
                       "--quant applies to --plan-only and --random-weights (a file's matrices keep their own formats)");
        luminal::check(!(args.chat && args.random_weights), "generate", "--chat needs a tokenizer: not with --random-weights");
        luminal::check(args.profile.empty() || args.device == "cuda", "generate", "--profile times CUDA launches: add --device cuda");
        if (args.device == "cuda") return run(args, luminal::cuda::CudaRuntime{});
        return run(args, luminal::CpuRuntime(luminal::CpuOptions{.threads = args.threads}));
    } catch (const luminal::Error& error) {
        std::fprintf(stderr, "generate: %s\n", error.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "generate: out of memory (try a smaller --context or --max-memory)\n");
        return 1;
    }
}

// Generation from Python over nn::Session, as examples/generate does it: the
// same prompt handling (chat template or plain text), stop tokens, pickable
// ids, samplers and seeds, so the ids equal generate's for the same arguments.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/sampling.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <variant>

#include "bindings.hpp"
#include "plan_json.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace luminal_python {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

using AnySession = std::variant<luminal::nn::Session<luminal::CpuRuntime>, luminal::nn::Session<luminal::cuda::CudaRuntime>>;

struct GenerateArgs {
    std::int64_t max_tokens = 32;
    double temperature = 0;
    std::int64_t top_k = 0;
    std::uint64_t seed = 0;
    bool chat = false;
    bool ignore_eos = false;
    bool raw_ids = false;
};

class LLM {
public:
    LLM(const std::string& path, const std::string& device, std::size_t threads, std::int64_t context,
        const std::string& weights, bool dequantize, const std::string& activations, std::size_t search)
        : device_(device) {
        luminal::check(device == "cpu" || device == "cuda", "LLM", "device must be 'cpu' or 'cuda', got '{}'", device);
        luminal::check(context > 0, "LLM", "context must be positive, got {}", context);
        luminal::check(activations == "q8" || activations == "f32", "LLM", "activations must be 'q8' or 'f32', got '{}'",
                       activations);
        nb::gil_scoped_release release;
        const auto load_start = Clock::now();
        pretrained_ = std::make_unique<luminal::nn::PretrainedModel>(luminal::nn::PretrainedModel::open(path));
        load_ms_ = ms_since(load_start);

        const auto compile_start = Clock::now();
        luminal::nn::ModelOptions options;
        options.context = context;
        options.weight_dtype = weight_dtype(weights);
        // As generate: the CUDA kernels have no block formats, so GGUF matrices are dequantized for them.
        if (!dequantize && device == "cpu") options.quantized = pretrained_->quantized_weights();
        options.q8_activations = activations == "q8";
        options.last_logits_only = true;
        model_ = std::make_unique<luminal::nn::CausalLm>(luminal::nn::build_causal_lm(pretrained_->config(), options));
        luminal::CompileOptions compile;
        compile.search_candidates = std::max<std::size_t>(search, 1);
        compile.verbosity = 0;
        if (device == "cuda")
            session_ = std::make_unique<AnySession>(std::in_place_index<1>, *model_, luminal::cuda::CudaRuntime{}, compile);
        else
            session_ = std::make_unique<AnySession>(
                std::in_place_index<0>, *model_, luminal::CpuRuntime(luminal::CpuOptions{.threads = threads}), compile);
        compile_ms_ = ms_since(compile_start);
        const auto bind_start = Clock::now();
        std::visit([&](auto& s) { s.load_weights(*pretrained_); }, *session_);
        load_ms_ += ms_since(bind_start);
    }

    const luminal::io::Tokenizer& tokenizer() const { return pretrained_->tokenizer(); }
    const luminal::io::ModelConfig& config() const { return pretrained_->config(); }
    luminal::io::ChatFamily chat_family() const { return pretrained_->chat_family(); }
    std::int64_t context() const { return model_->options.context; }

    std::vector<std::int32_t> tokenize(const std::string& text, bool add_special) const {
        return tokenizer().encode(text, add_special);
    }
    std::string detokenize(const std::vector<std::int32_t>& ids, bool skip_special) const {
        for (std::size_t i = 0; i < ids.size(); ++i)
            luminal::check(ids[i] >= 0 && ids[i] < config().vocab_size, "detokenize",
                           "id {} at {} is outside the vocabulary (size {})", ids[i], i, config().vocab_size);
        return tokenizer().decode(ids, skip_special);
    }
    std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                                    bool add_generation_prompt) const {
        std::vector<luminal::io::ChatMessage> chat;
        for (auto& [role, content] : messages) chat.push_back({role, content});
        return luminal::io::render_chat(chat_family(), chat, {.add_generation_prompt = add_generation_prompt});
    }

    // The prompt's ids, as generate makes them: the chat template's text
    // without added special tokens, or the plain text with them.
    std::vector<std::int32_t> prompt_ids(const std::string& prompt, bool chat) const {
        const std::vector<luminal::io::ChatMessage> messages{{"user", prompt}};
        const std::string text = chat ? luminal::io::render_chat(chat_family(), messages) : prompt;
        std::vector<std::int32_t> ids = tokenizer().encode(text, !chat);
        luminal::check(!ids.empty(), "generate", "the prompt encodes to no tokens");
        return ids;
    }

    std::vector<std::int32_t> stop_ids(bool chat) const {
        std::vector<std::int32_t> stops(config().eos_token_ids.begin(), config().eos_token_ids.end());
        if (auto eos = tokenizer().eos_id()) stops.push_back(*eos);
        if (chat)
            for (const std::string& name : luminal::io::chat_stop_tokens(chat_family()))
                if (auto id = tokenizer().token_to_id(name)) stops.push_back(*id);
        return stops;
    }

    std::vector<float> forward(const std::vector<std::int32_t>& ids) {
        return std::visit([&](auto& s) { return s.forward(ids); }, *session_);
    }
    void reset() { std::visit([](auto& s) { s.reset(); }, *session_); }
    std::int64_t position() const { return std::visit([](const auto& s) { return s.position(); }, *session_); }

    double compile_ms() const { return compile_ms_; }
    double load_ms() const { return load_ms_; }
    const std::string& device() const { return device_; }

private:
    static luminal::DType weight_dtype(const std::string& name) {
        if (name == "f32") return luminal::DType::F32;
        if (name == "f16") return luminal::DType::F16;
        if (name == "bf16") return luminal::DType::BF16;
        throw luminal::Error("LLM", fmt::format("weights must be 'f32', 'f16' or 'bf16', got '{}'", name));
    }

    std::string device_;
    std::unique_ptr<luminal::nn::PretrainedModel> pretrained_;
    std::unique_ptr<luminal::nn::CausalLm> model_;  // the session keeps a reference: it stays put
    std::unique_ptr<AnySession> session_;
    double compile_ms_ = 0, load_ms_ = 0;
};

// One generation, a piece of text per decode step: the prefill picks the
// first token, each next() runs one step (the GIL released meanwhile).
class Generation {
public:
    Generation(LLM& llm, const std::string& prompt, std::optional<std::vector<std::int32_t>> ids, const GenerateArgs& args)
        : llm_(llm), args_(args), stream_(llm.tokenizer(), true),
          pickable_(args.raw_ids ? std::vector<bool>{} : luminal::nn::decodable_ids(llm.tokenizer(), llm.config().vocab_size)),
          sampler_(args.temperature, args.top_k, args.seed + 1, pickable_) {
        luminal::check(args.max_tokens > 0, "generate", "max_tokens must be positive, got {}", args.max_tokens);
        prompt_ = ids ? *ids : llm.prompt_ids(prompt, args.chat);
        luminal::check(!prompt_.empty(), "generate", "the prompt has no tokens");
        for (std::int32_t id : prompt_)
            luminal::check(id >= 0 && id < llm.config().vocab_size, "generate", "prompt id {} is outside the vocabulary "
                           "(size {})", id, llm.config().vocab_size);
        stops_ = llm.stop_ids(args.chat);
    }

    std::optional<std::string> next() {
        if (done_) return std::nullopt;
        nb::gil_scoped_release release;
        const auto vocab = static_cast<std::size_t>(llm_.config().vocab_size);
        if (generated_.empty()) {
            llm_.reset();
            luminal::nn::Sampler first(args_.temperature, args_.top_k, args_.seed, pickable_);
            const auto start = Clock::now();
            const std::vector<float> logits = llm_.forward(prompt_);
            token_ = first(std::span(logits).subspan(logits.size() - vocab, vocab));
            ttft_ms_ = ms_since(start);
            generated_.push_back(token_);
            return stream_.step(token_);
        }
        const bool stopped = !args_.ignore_eos && std::find(stops_.begin(), stops_.end(), token_) != stops_.end();
        if (static_cast<std::int64_t>(generated_.size()) >= args_.max_tokens || llm_.position() >= llm_.context() || stopped) {
            done_ = true;
            std::string tail = stream_.finish();
            if (tail.empty()) return std::nullopt;
            return tail;
        }
        const auto start = Clock::now();
        const std::vector<float> logits = llm_.forward(std::vector<std::int32_t>{token_});
        token_ = sampler_(logits);
        const double step_ms = ms_since(start);
        if (generated_.size() > 1) tpot_samples_.push_back(step_ms);  // the first decode step warms up
        generated_.push_back(token_);
        return stream_.step(token_);
    }

    nb::dict stats() const {
        double tpot = 0;
        for (double t : tpot_samples_) tpot += t / static_cast<double>(tpot_samples_.size());
        nb::dict d;
        d["compile_ms"] = llm_.compile_ms();
        d["load_ms"] = llm_.load_ms();
        d["prompt_tokens"] = prompt_.size();
        d["ttft_ms"] = ttft_ms_;
        d["tpot_ms"] = tpot;
        d["decode_tokens"] = tpot_samples_.size();
        d["throughput_tps"] = tpot > 0 ? 1000.0 / tpot : 0.0;
        d["prompt_ids"] = prompt_;
        d["generated_ids"] = generated_;
        d["device"] = llm_.device();
        return d;
    }

private:
    LLM& llm_;
    GenerateArgs args_;
    luminal::io::StreamingDecoder stream_;
    std::vector<bool> pickable_;
    luminal::nn::Sampler sampler_;
    std::vector<std::int32_t> prompt_, stops_, generated_;
    std::int32_t token_ = 0;
    double ttft_ms_ = 0;
    std::vector<double> tpot_samples_;
    bool done_ = false;
};

// The program nn::Session compiles for a model of this config.json (random weights need
// not be bound to compile): what the torch front end's program of the same model is
// compared with.
std::vector<std::pair<std::string, std::string>> causal_lm_program_ops(const std::string& config_json, std::int64_t context, std::size_t threads) {
    nb::gil_scoped_release release;
    const luminal::io::ModelConfig config =
        luminal::io::parse_model_config(luminal::io::parse_json(config_json, "config"), "config");
    luminal::nn::ModelOptions options;
    options.context = context;
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, options);
    luminal::CompileOptions compile;
    compile.verbosity = 0;
    const luminal::nn::Session<luminal::CpuRuntime> session(model, luminal::CpuRuntime(luminal::CpuOptions{.threads = threads}),
                                                            compile);
    return program_ops(session.report().program);
}

// The CUDA plan nn::Session compiles for the model of this config.json (no device, no
// weights), as generate --plan-only builds it, of one step of `new_tokens` after `cached`:
// what the torch front end's CUDA plan of the same model is compared with.
std::string causal_lm_cuda_plan(const std::string& config_json, std::int64_t context, std::int64_t cached,
                                std::int64_t new_tokens, luminal::DType weights, bool sample_in_graph) {
    nb::gil_scoped_release release;
    const luminal::io::ModelConfig config =
        luminal::io::parse_model_config(luminal::io::parse_json(config_json, "config"), "config");
    luminal::nn::ModelOptions options;
    options.context = context;
    options.weight_dtype = weights;
    options.last_logits_only = true;
    options.kv_dtype = luminal::DType::BF16;
    options.sample_in_graph = sample_in_graph;
    options.narrow_activations = true;
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, options);
    luminal::CompileOptions compile;
    compile.verbosity = 0;
    const luminal::nn::Session<luminal::cuda::HostEmulator> session(model, luminal::cuda::HostEmulator{}, compile);
    luminal::DynMap dims;
    dims.set('s', new_tokens);
    dims.set('p', cached);
    return cuda_plan_json(session.report().program, dims);
}

}  // namespace

void bind_llm(nb::module_& m) {
    m.def("causal_lm_cuda_plan", &causal_lm_cuda_plan, "config_json"_a, "context"_a, "cached"_a, "new_tokens"_a = 1,
          "weights"_a = luminal::DType::BF16, "sample_in_graph"_a = false,
          "the CUDA plan (JSON: totals, launches) nn::Session compiles for the model of a config.json, of one step of "
          "new_tokens after cached, as generate --plan-only plans it");
    m.def("causal_lm_program_ops", &causal_lm_program_ops, "config_json"_a, "context"_a = 64, "threads"_a = 1,
          "(op, result dtype) of each node of the CPU program nn::Session compiles for the model of a config.json");
    nb::class_<LLM>(m, "_LLM")
        .def(nb::init<const std::string&, const std::string&, std::size_t, std::int64_t, const std::string&, bool,
                      const std::string&, std::size_t>(),
             "path"_a, "device"_a, "threads"_a, "context"_a, "weights"_a, "dequantize"_a, "activations"_a, "search"_a)
        .def("tokenize", &LLM::tokenize, "text"_a, "add_special_tokens"_a = true)
        .def("detokenize", &LLM::detokenize, "ids"_a, "skip_special_tokens"_a = false)
        .def("apply_chat_template", &LLM::apply_chat_template, "messages"_a, "add_generation_prompt"_a = true)
        .def("prompt_ids", &LLM::prompt_ids, "prompt"_a, "chat"_a = false)
        .def_prop_ro("vocab_size", [](const LLM& l) { return l.config().vocab_size; })
        .def_prop_ro("context", &LLM::context)
        .def_prop_ro("compile_ms", &LLM::compile_ms)
        .def_prop_ro("load_ms", &LLM::load_ms)
        .def_prop_ro("device", &LLM::device)
        .def("_start", [](LLM& llm, const std::string& prompt, std::optional<std::vector<std::int32_t>> ids,
                          std::int64_t max_tokens, double temperature, std::int64_t top_k, std::uint64_t seed, bool chat,
                          bool ignore_eos, bool raw_ids) {
            return new Generation(llm, prompt, std::move(ids),
                                  GenerateArgs{max_tokens, temperature, top_k, seed, chat, ignore_eos, raw_ids});
        }, "prompt"_a, "prompt_ids"_a, "max_tokens"_a, "temperature"_a, "top_k"_a, "seed"_a, "chat"_a, "ignore_eos"_a,
             "raw_ids"_a, nb::keep_alive<0, 1>(), nb::rv_policy::take_ownership);
    nb::class_<Generation>(m, "_Generation")
        .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
        .def("__next__", [](Generation& g) {
            auto piece = g.next();
            if (!piece) throw nb::stop_iteration();
            return *piece;
        })
        .def_prop_ro("stats", &Generation::stats);
}

}  // namespace luminal_python

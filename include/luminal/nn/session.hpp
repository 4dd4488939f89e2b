#pragma once
// A compiled model with its weights bound, run token by token: forward() takes
// the next tokens (a whole prompt, or one), runs them after those so far with
// the KV caches, and returns their logits. One compiled program serves every
// prompt length and every decode step.
#include "luminal/egraph/compile.hpp"
#include "luminal/io/safetensors_model.hpp"
#include "luminal/nn/causal_lm.hpp"
#include "luminal/nn/checkpoint.hpp"
#include "luminal/nn/memory_budget.hpp"
#include "luminal/nn/pretrained.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace luminal::nn {

template <typename Runtime>
class Session {
public:
    // Compiles `model` for `runtime`; load_weights() must follow before forward().
    // What the weights, the KV caches and the runtime's buffers need is checked
    // against `limit` (by default the memory available) first: an Error says
    // what does not fit and which option lowers it.
    Session(CausalLm& model, Runtime runtime, const CompileOptions& options = {}, MemoryLimit limit = {})
        : model_(model), limit_(limit) {
        check_memory(resident_uses(), limit_, available_memory_of(runtime), kWhere);
        auto compiled = reporting_out_of_memory(kWhere, "compiling the model", [&] {
            return compile_with_report(*model_.graph, std::move(runtime), with_typical_workloads(options));
        });
        runtime_ = std::move(compiled.first);
        report_ = std::move(compiled.second);
        if constexpr (requires { runtime_.planned_bytes(DynMap{}); }) {
            std::uint64_t arena = 0;
            for (const auto& [dims, weight] : with_typical_workloads({}).workloads)
                arena = std::max(arena, runtime_.planned_bytes(dims));
            DynMap full;  // a decode step over a full cache
            full.set('s', 1);
            full.set('p', model_.options.context - 1);
            arena = std::max(arena, runtime_.planned_bytes(full));
            std::vector<MemoryUse> uses = resident_uses();
            uses.push_back(arena_use(arena, "a 64-token prompt or a decode step"));
            check_memory(std::move(uses), limit_, available_memory_of(runtime_), kWhere);
        }
    }

    // Binds `weights` (checked against the model) and starts from no tokens.
    template <Checkpoint Weights>
    void load_weights(const Weights& weights) {
        reporting_out_of_memory(kWhere, "binding the weights",
                                [&] { model_.parameters.bind(runtime_, weights, model_.ignorable); });
        loaded_ = true;
        if (model_.sampling) set_sampling(0, 0, 0);
        reset();
    }
    void load_weights(const io::SafetensorsModel& weights) { load_weights(SafetensorsCheckpoint(weights)); }
    void load_weights(const PretrainedModel& pretrained) {
        pretrained.with_checkpoint([&](const auto& weights) { load_weights(weights); });
    }

    // Forgets the tokens so far (clears the caches).
    void reset() {
        reporting_out_of_memory(kWhere, "clearing the KV caches", [&] { model_.caches.clear(runtime_); });
        position_ = 0;
    }

    // Logits [tokens.size(), vocab], row-major, of `tokens` following the ones
    // so far ([1, vocab] of the last one with ModelOptions::last_logits_only).
    std::vector<float> forward(std::span<const std::int32_t> tokens) {
        run(tokens);
        return runtime_.get_f32(model_.logits);
    }

    // How the graph picks the next token (a model built with
    // ModelOptions::sample_in_graph): greedy at temperature 0, else among the
    // top_k best (0: all) at that temperature, drawn with `seed`; only the ids
    // `pickable` allows (empty: all) are ever picked.
    void set_sampling(double temperature, std::int64_t top_k, std::uint64_t seed, const std::vector<bool>& pickable = {}) {
        check(model_.sampling.has_value(), "Session::set_sampling", "the model was built without ModelOptions::sample_in_graph");
        check(temperature >= 0 && std::isfinite(temperature), "Session::set_sampling", "temperature must be >= 0, got {}", temperature);
        check(top_k >= 0 && top_k < (std::int64_t{1} << 24), "Session::set_sampling", "top_k must be in [0, 2^24), got {}", top_k);
        check(seed < (std::uint64_t{1} << 24), "Session::set_sampling", "the seed must be below 2^24 (the graph holds it as f32), got {}",
              seed);
        const auto vocab = static_cast<std::size_t>(model_.config.vocab_size);
        std::vector<float> bias(vocab, 0.0f);
        if (!pickable.empty()) {
            for (std::size_t id = 0; id < vocab; ++id)
                if (id >= pickable.size() || !pickable[id]) bias[id] = -std::numeric_limits<float>::infinity();
            check(std::find(bias.begin(), bias.end(), 0.0f) != bias.end(), "Session::set_sampling", "the pickable mask allows no id");
        }
        runtime_.set_data(model_.sampling->bias, bias);
        runtime_.set_data(model_.sampling->settings,
                          std::vector<float>{static_cast<float>(temperature), static_cast<float>(top_k), static_cast<float>(seed)});
    }

    // The token the graph picks after `tokens` (which run as in forward());
    // only its id is read back.
    std::int32_t next(std::span<const std::int32_t> tokens) {
        check(model_.sampling.has_value(), "Session::next", "the model was built without ModelOptions::sample_in_graph");
        run(tokens);
        return runtime_.template get<std::int32_t>(model_.sampling->token).back();
    }

    std::int64_t position() const { return position_; }
    const CompileReport& report() const { return report_; }
    Runtime& runtime() { return runtime_; }

private:
    void run(std::span<const std::int32_t> tokens) {
        const auto count = static_cast<std::int64_t>(tokens.size());
        check(loaded_, "Session::forward", "no weights loaded; call load_weights first");
        check(count > 0, "Session::forward", "no tokens given");
        check(position_ + count <= model_.options.context, "Session::forward",
              "{} cached + {} new tokens exceed the context of {} tokens", position_, count, model_.options.context);
        const auto vocab = static_cast<std::int32_t>(model_.config.vocab_size);
        for (std::size_t i = 0; i < tokens.size(); ++i)
            check(tokens[i] >= 0 && tokens[i] < vocab, "Session::forward", "token {} at {} is outside the vocabulary "
                  "of {}", tokens[i], i, vocab);
        model_.graph->set_dim('s', count);
        model_.graph->set_dim('p', position_);
        if constexpr (requires { runtime_.planned_bytes(DynMap{}); }) {
            // A prompt's buffers grow with its length; decode steps were checked with the session.
            if (count > 1) check_prompt_memory(count);
        }
        reporting_out_of_memory(kWhere, fmt::format("running {} tokens after {}", count, position_), [&] {
            runtime_.set_data(model_.input_ids, std::vector<std::int32_t>(tokens.begin(), tokens.end()));
            runtime_.execute(model_.graph->dyn_map());
            position_ += count;
        });
    }


    static constexpr std::string_view kWhere = "nn::Session";

    // The weights and the KV caches at their capacity.
    std::vector<MemoryUse> resident_uses() const {
        std::uint64_t weights = 0;
        for (const Parameter& p : model_.parameters.parameters()) {
            std::uint64_t n = 1;
            for (std::int64_t d : p.shape) n *= static_cast<std::uint64_t>(d);
            weights += p.format ? static_cast<std::uint64_t>(quantized_bytes(*p.format, p.shape[0], p.shape[1]))
                                : n * size_of(p.tensor.dtype());
        }
        const std::int64_t context = model_.options.context;
        const std::uint64_t cache = model_.caches.bytes();
        const DType cache_dtype = model_.caches.layers.empty() ? DType::F32 : model_.caches.layers[0].keys.dtype();
        return {
            {fmt::format("weights ({} tensors)", model_.parameters.parameters().size()), weights,
             "keeping matrices quantized (a GGUF file) or in 16 bits (ModelOptions::weight_dtype, generate's "
             "--weights)", 0, ""},
            {fmt::format("KV cache ({} tokens x {} layers, {})", context, model_.caches.layers.size(),
                         name_of(cache_dtype)),
             cache, "a smaller ModelOptions::context (generate's --context)",
             context > 0 ? cache / static_cast<std::uint64_t>(context) : 0, "tokens"},
        };
    }
    static MemoryUse arena_use(std::uint64_t bytes, std::string_view what) {
        return {fmt::format("the runtime's buffers for {}", what), bytes, "", 0, ""};
    }
    void check_prompt_memory(std::int64_t count) {
        const std::uint64_t arena = runtime_.planned_bytes(model_.graph->dyn_map());
        const std::string what = fmt::format("a {}-token prompt", count);
        if (limit_.max_bytes) {
            std::vector<MemoryUse> uses = resident_uses();
            uses.push_back(arena_use(arena, what));
            uses.back().lowered_by = "a shorter prompt (Session::forward in pieces)";
            check_memory(std::move(uses), limit_, std::nullopt, kWhere);
        } else {  // the weights and caches are allocated already: what the machine has left must hold the rest
            const std::uint64_t held = runtime_.peak_bytes();
            if (arena > held)
                check_memory({{fmt::format("the runtime's buffers for {}, beyond the {} held", what,
                                           format_bytes(held)),
                               arena - held, "a shorter prompt (Session::forward in pieces)", 0, ""}},
                             limit_, available_memory_of(runtime_), kWhere);
        }
    }

    // Unless the caller chose workloads: a prompt and, weighted by the tokens
    // a typical reply has, one decode step over a half-full cache, so the
    // cost model and the profiler see attention at a size that matters.
    // A runtime that holds specialized programs gets one for decode steps (s = 1) instead.
    CompileOptions with_typical_workloads(CompileOptions options) const {
        if (!options.workloads.empty()) return options;
        constexpr std::int64_t kPromptTokens = 64, kReplyTokens = 64;
        const std::int64_t context = model_.options.context;
        DynMap prompt, decode;
        prompt.set('s', std::min(kPromptTokens, context));
        prompt.set('p', 0);
        decode.set('s', 1);
        decode.set('p', context / 2);
        if constexpr (RunsSpecializations<Runtime>) {
            options.workloads = {{prompt, 1}};
            if (options.specializations.empty()) options.specializations = {{DynMap{{'s', 1}}, {{decode, 1}}}};
        } else {
            options.workloads = {{prompt, 1}, {decode, static_cast<double>(kReplyTokens)}};
        }
        return options;
    }

    CausalLm& model_;
    MemoryLimit limit_;
    Runtime runtime_;
    CompileReport report_;
    std::int64_t position_ = 0;
    bool loaded_ = false;
};

}  // namespace luminal::nn

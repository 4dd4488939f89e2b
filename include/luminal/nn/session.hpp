#pragma once
// A compiled model with its weights bound, run token by token: forward() takes
// the next tokens (a whole prompt, or one), runs them after those so far with
// the KV caches, and returns their logits. One compiled program serves every
// prompt length and every decode step.
#include "luminal/egraph/compile.hpp"
#include "luminal/io/safetensors_model.hpp"
#include "luminal/nn/causal_lm.hpp"
#include "luminal/nn/checkpoint.hpp"
#include "luminal/nn/pretrained.hpp"

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace luminal::nn {

template <typename Runtime>
class Session {
public:
    // Compiles `model` for `runtime`; load_weights() must follow before forward().
    Session(CausalLm& model, Runtime runtime, const CompileOptions& options = {}) : model_(model) {
        auto compiled = compile_with_report(*model_.graph, std::move(runtime), with_typical_workloads(options));
        runtime_ = std::move(compiled.first);
        report_ = std::move(compiled.second);
    }

    // Binds `weights` (checked against the model) and starts from no tokens.
    template <Checkpoint Weights>
    void load_weights(const Weights& weights) {
        model_.parameters.bind(runtime_, weights, model_.ignorable);
        loaded_ = true;
        reset();
    }
    void load_weights(const io::SafetensorsModel& weights) { load_weights(SafetensorsCheckpoint(weights)); }
    void load_weights(const PretrainedModel& pretrained) {
        pretrained.with_checkpoint([&](const auto& weights) { load_weights(weights); });
    }

    // Forgets the tokens so far (clears the caches).
    void reset() {
        model_.caches.clear(runtime_);
        position_ = 0;
    }

    // Logits [tokens.size(), vocab], row-major, of `tokens` following the ones
    // so far ([1, vocab] of the last one with ModelOptions::last_logits_only).
    std::vector<float> forward(std::span<const std::int32_t> tokens) {
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
        runtime_.set_data(model_.input_ids, std::vector<std::int32_t>(tokens.begin(), tokens.end()));
        runtime_.execute(model_.graph->dyn_map());
        position_ += count;
        return runtime_.get_f32(model_.logits);
    }

    std::int64_t position() const { return position_; }
    const CompileReport& report() const { return report_; }
    Runtime& runtime() { return runtime_; }

private:
    // Unless the caller chose workloads: a prompt and, weighted by the tokens
    // a typical reply has, one decode step over a half-full cache, so the
    // cost model and the profiler see attention at a size that matters.
    CompileOptions with_typical_workloads(CompileOptions options) const {
        if (!options.workloads.empty()) return options;
        constexpr std::int64_t kPromptTokens = 64, kReplyTokens = 64;
        const std::int64_t context = model_.options.context;
        DynMap prompt, decode;
        prompt.set('s', std::min(kPromptTokens, context));
        prompt.set('p', 0);
        decode.set('s', 1);
        decode.set('p', context / 2);
        options.workloads = {{prompt, 1}, {decode, static_cast<double>(kReplyTokens)}};
        return options;
    }

    CausalLm& model_;
    Runtime runtime_;
    CompileReport report_;
    std::int64_t position_ = 0;
    bool loaded_ = false;
};

}  // namespace luminal::nn

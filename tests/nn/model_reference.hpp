#pragma once
// A model run against a transformers reference file (tools/gen_model_fixtures.py,
// tools/gen_variant_fixtures.py): every prompt position of the prefill, then
// greedy decode steps through the KV cache. Tolerance: max |diff| <= 1e-4 (f32
// everywhere; differences come from summation order only).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <luminal/luminal.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace luminal_test {

constexpr double kLogitTolerance = 1e-4;

inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    return worst;
}

inline std::int32_t greedy_pick(std::span<const float> row) {
    return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

using PickToken = std::function<std::int32_t(std::span<const float>)>;

// Prefill and decode of `config`'s model on a Runtime, with the weights `load`
// binds, each next token chosen by `pick`, against the logits and ids in
// `reference_file`: `prefix` + "generated_ids" / "decode_logits"
// (prefill_logits and prompt_ids are shared), within `tolerance`. Returns the
// ids picked. `options` sets what the model keeps quantized (context: 32).
template <typename Runtime = luminal::CpuRuntime, typename Load>
std::vector<std::int32_t> check_against_reference(const luminal::io::ModelConfig& config, const Load& load,
                                                  const std::filesystem::path& reference_file,
                                                  const PickToken& pick = greedy_pick, const std::string& prefix = "",
                                                  luminal::nn::ModelOptions model_options = {},
                                                  double tolerance = kLogitTolerance) {
    const auto reference = luminal::io::SafetensorsFile::open(reference_file);
    const auto prompt64 = luminal::io::to_vector<std::int64_t>(reference.at("prompt_ids"));
    const auto prefill = luminal::io::to_f32(reference.at("prefill_logits"));
    const auto generated = luminal::io::to_vector<std::int64_t>(reference.at(prefix + "generated_ids"));
    const auto decode = luminal::io::to_f32(reference.at(prefix + "decode_logits"));

    model_options.context = 32;
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, model_options);
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, Runtime{}, options);
    load(session);
    const auto vocab = static_cast<std::size_t>(model.config.vocab_size);

    const std::vector<std::int32_t> prompt(prompt64.begin(), prompt64.end());
    const std::vector<float> logits = session.forward(prompt);
    double worst = max_abs_diff(logits, prefill);
    CHECK(max_abs_diff(logits, prefill) <= tolerance);

    std::vector<std::int32_t> picked{pick(std::span(logits).subspan((prompt.size() - 1) * vocab, vocab))};
    CHECK(picked.back() == generated[0]);
    for (std::size_t step = 1; step < generated.size(); ++step) {
        CAPTURE(step);
        const std::vector<float> row = session.forward(std::vector<std::int32_t>{picked.back()});
        const double step_error = max_abs_diff(row, std::span(decode).subspan(step * vocab, vocab));
        worst = std::max(worst, step_error);
        CHECK(step_error <= tolerance);
        picked.push_back(pick(row));
        CHECK(picked.back() == generated[step]);
    }
    // On the CPU each step writes its keys and values into the caches in place, not into copies of them.
    if constexpr (std::is_same_v<Runtime, luminal::CpuRuntime>)
        for (const luminal::nn::KvCache& layer : model.caches.layers) {
            CHECK(session.runtime().updates_in_place(layer.updated_keys));
            CHECK(session.runtime().updates_in_place(layer.updated_values));
        }
    if (tolerance != kLogitTolerance) MESSAGE("largest logit difference: " << worst);
    return picked;
}

// A Hugging Face directory or .gguf file opened as a user would (PretrainedModel),
// against the reference.safetensors beside it (or `reference_file`). Returns the ids picked.
inline std::vector<std::int32_t> check_pretrained(const std::filesystem::path& path,
                                                  std::filesystem::path reference_file = {}) {
    CAPTURE(path.string());
    if (reference_file.empty())
        reference_file = (std::filesystem::is_directory(path) ? path : path.parent_path()) / "reference.safetensors";
    const auto pretrained = luminal::nn::PretrainedModel::open(path);
    return check_against_reference(
        pretrained.config(), [&](auto& session) { session.load_weights(pretrained); }, reference_file);
}

}  // namespace luminal_test

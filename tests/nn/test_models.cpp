// The bundled models against transformers: tiny random-weight models of each
// family (tests/data/models, from tools/gen_model_fixtures.py) loaded through
// the same path a real model directory takes, compiled for the CpuRuntime, and
// compared with transformers' logits: every prompt position of the prefill,
// then 8 greedy decode steps through the KV cache. Tolerance: max |diff| <=
// 1e-4 (f32 everywhere; differences come from summation order only).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kModels = std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "models";
constexpr double kTolerance = 1e-4;

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    return worst;
}

std::int32_t argmax(std::span<const float> row) {
    return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

void check_family(const std::string& name) {
    CAPTURE(name);
    const auto dir = kModels / name;
    const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(dir);
    const auto reference = luminal::io::SafetensorsFile::open(dir / "reference.safetensors");
    const auto prompt64 = luminal::io::to_vector<std::int64_t>(reference.at("prompt_ids"));
    const auto prefill = luminal::io::to_f32(reference.at("prefill_logits"));
    const auto generated = luminal::io::to_vector<std::int64_t>(reference.at("generated_ids"));
    const auto decode = luminal::io::to_f32(reference.at("decode_logits"));

    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(luminal::io::load_model_config(dir), {.context = 32});
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
    session.load_weights(weights);
    const auto vocab = static_cast<std::size_t>(model.config.vocab_size);

    const std::vector<std::int32_t> prompt(prompt64.begin(), prompt64.end());
    const std::vector<float> logits = session.forward(prompt);
    CHECK(max_abs_diff(logits, prefill) <= kTolerance);

    std::int32_t next = argmax(std::span(logits).subspan((prompt.size() - 1) * vocab, vocab));
    CHECK(next == generated[0]);
    for (std::size_t step = 1; step < generated.size(); ++step) {
        CAPTURE(step);
        const std::vector<float> row = session.forward(std::vector<std::int32_t>{next});
        CHECK(max_abs_diff(row, std::span(decode).subspan(step * vocab, vocab)) <= kTolerance);
        next = argmax(row);
        CHECK(next == generated[step]);
    }
}

}  // namespace

TEST_CASE("llama matches transformers: prefill and greedy decode") { check_family("llama"); }
TEST_CASE("qwen3 matches transformers: prefill and greedy decode") { check_family("qwen3"); }
TEST_CASE("qwen3-moe matches transformers: prefill and greedy decode") { check_family("qwen3_moe"); }
TEST_CASE("gemma3 matches transformers: prefill and greedy decode") { check_family("gemma3"); }
TEST_CASE("gemma4-moe matches transformers: prefill and greedy decode") { check_family("gemma4_moe"); }

// A 16-bit KV cache on the CPU: the tiny Llama and Qwen3 models (tests/data/models,
// tools/gen_model_fixtures.py) with f16 and bf16 caches against transformers' f32
// logits, within the rounding of keys and values to 16 bits (f16: 11 significant bits,
// bf16: 8), and against the same model with an f32 cache (which model_reference.hpp
// holds to 1e-4 of transformers); the attention's products read the cache as stored.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kCacheModels = luminal_test::data_dir() / "models";

// Largest |logit difference| the fixtures allow for a cache of `dtype` (logits of
// size ~1-10; the keys and values rounded to f16's 2^-11 or bf16's 2^-8 relative
// step): measured on them at 2.3e-3 (f16) and 1.8e-2 (bf16), allowed with a margin of 2x.
double cache_tolerance(luminal::DType dtype) { return dtype == luminal::DType::F16 ? 5e-3 : 4e-2; }

// Prefill then two greedy decode steps with a cache of `dtype`: all logits, in order.
std::vector<float> logits_with_cache(const std::string& family, luminal::DType dtype, std::string* program = nullptr) {
    const auto dir = kCacheModels / family;
    const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(dir);
    luminal::nn::ModelOptions model_options;
    model_options.context = 32;
    model_options.kv_dtype = dtype;
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(luminal::io::load_model_config(dir), model_options);
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
    session.load_weights(weights);
    if (program) *program = session.report().program.to_string();
    const auto reference = luminal::io::SafetensorsFile::open(dir / "reference.safetensors");
    const auto prompt64 = luminal::io::to_vector<std::int64_t>(reference.at("prompt_ids"));
    std::vector<float> all = session.forward(std::vector<std::int32_t>(prompt64.begin(), prompt64.end()));
    const auto vocab = static_cast<std::size_t>(model.config.vocab_size);
    for (int step = 0; step < 2; ++step) {
        const std::span<const float> last(all.data() + all.size() - vocab, vocab);
        const std::vector<float> row = session.forward(std::vector<std::int32_t>{luminal_test::greedy_pick(last)});
        all.insert(all.end(), row.begin(), row.end());
    }
    return all;
}

// The program's Cast nodes whose result is f32.
std::size_t casts_to_f32(const std::string& program) {
    std::size_t count = 0;
    for (std::size_t at = program.find("= Cast("); at != std::string::npos; at = program.find("= Cast(", at + 1)) {
        const std::size_t end = program.find('\n', at);
        if (program.compare(end - 4, 4, " f32") == 0) ++count;
    }
    return count;
}

}  // namespace

TEST_CASE("a 16-bit KV cache on the CPU matches transformers within its rounding, and the f32 cache") {
    for (const std::string family : {"llama", "qwen3"})
        for (luminal::DType dtype : {luminal::DType::F16, luminal::DType::BF16}) {
            CAPTURE(family);
            CAPTURE(luminal::name_of(dtype));
            const auto dir = kCacheModels / family;
            const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(dir);
            luminal::nn::ModelOptions model_options;
            model_options.kv_dtype = dtype;
            luminal_test::check_against_reference<luminal::CpuRuntime>(
                luminal::io::load_model_config(dir), [&](auto& session) { session.load_weights(weights); },
                dir / "reference.safetensors", luminal_test::greedy_pick, "", model_options, cache_tolerance(dtype));

            std::string narrow_program, wide_program;
            const std::vector<float> narrow = logits_with_cache(family, dtype, &narrow_program);
            const std::vector<float> wide = logits_with_cache(family, luminal::DType::F32, &wide_program);
            const double difference = luminal_test::max_abs_diff(narrow, wide);
            MESSAGE("largest difference from the f32 cache: " << difference);
            CHECK(difference <= cache_tolerance(dtype));
            CHECK(difference > 0);  // the cache really holds 16 bits
            // The attention's products read the 16-bit cache: no more Casts to f32 than with
            // an f32 cache (whose Casts are copies of f32 views), none of the cache's window.
            CHECK(casts_to_f32(narrow_program) == casts_to_f32(wide_program));
        }
}

// The RoPE types whose frequencies transformers scales, against transformers
// (tests/data/variants, from tools/gen_variant_fixtures.py): YaRN (Qwen3's
// long-context setting), dynamic NTK (its base grows with the sequence past
// max_position_embeddings, at the prefill and at every decode step) and
// LongRoPE (short factors up to its pretraining context, long ones past it,
// switching during the decode). Prefill and 8 greedy decode steps.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>

namespace {

void check_rope_variant(const std::string& name) {
    CAPTURE(name);
    const auto dir = luminal_test::data_dir() / "variants" / name;
    const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(dir);
    luminal_test::check_against_reference(
        luminal::io::load_model_config(dir), [&](auto& session) { session.load_weights(weights); },
        dir / "reference.safetensors");
}

luminal::io::RopeConfig rope_of(const std::string& config_json) {
    return luminal::io::parse_model_config(luminal::io::parse_json(config_json, "config"), "config").layers[0].rope;
}

constexpr const char* kLlamaSizes = R"("model_type": "llama", "vocab_size": 32, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64)";

}  // namespace

TEST_CASE("yarn RoPE matches transformers: prefill and greedy decode") { check_rope_variant("qwen3_rope_yarn"); }
TEST_CASE("dynamic RoPE matches transformers: prefill and greedy decode") { check_rope_variant("llama_rope_dynamic"); }
TEST_CASE("longrope matches transformers: prefill and greedy decode") { check_rope_variant("llama_rope_longrope"); }

TEST_CASE("RoPE attention factors and defaults follow transformers") {
    using luminal::nn::rope_attention_scaling;
    // YaRN: 0.1 ln(factor) + 1; with mscale and mscale_all_dim, their ratio.
    const auto yarn = rope_of(std::string("{") + kLlamaSizes +
                              R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                 "original_max_position_embeddings": 16}})");
    CHECK(rope_attention_scaling(yarn) == doctest::Approx(1 + 0.1 * std::log(4.0)));
    const auto deepseek = rope_of(std::string("{") + kLlamaSizes +
                                  R"(, "rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 2.0,
                                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 16}})");
    CHECK(rope_attention_scaling(deepseek) == doctest::Approx((0.2 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1)));
    // LongRoPE with a model-level original_max_position_embeddings (Phi-3 writes it there) and no factor: their ratio.
    const auto implicit = rope_of(std::string("{") + kLlamaSizes +
                                  R"(, "original_max_position_embeddings": 16,
                                     "rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1, 1, 1],
                                                      "long_factor": [2, 2, 2, 2]}})");
    CHECK(implicit.original_max_position_embeddings == 16);
    CHECK(implicit.factor == 4.0);
    CHECK(rope_attention_scaling(implicit) == doctest::Approx(std::sqrt(1 + std::log(4.0) / std::log(16.0))));
    // YaRN without original_max_position_embeddings: the model's context.
    const auto explicit_factor = rope_of(std::string("{") + kLlamaSizes +
                                         R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2.0,
                                            "attention_factor": 0.5}})");
    CHECK(explicit_factor.original_max_position_embeddings == 64);
    CHECK(rope_attention_scaling(explicit_factor) == 0.5);
}

TEST_CASE("bad RoPE settings are Errors naming the field") {
    auto error_of = [](const std::string& rope) {
        try {
            (void)rope_of(std::string("{") + kLlamaSizes + R"(, "rope_scaling": )" + rope + "}");
        } catch (const luminal::Error& error) {
            return std::string(error.what());
        }
        return std::string();
    };
    CHECK(error_of(R"({"rope_type": "ntk-by-parts", "factor": 2.0})").find("rope_type 'ntk-by-parts' is not supported") !=
          std::string::npos);
    CHECK(error_of(R"({"rope_type": "dynamic"})").find("factor") != std::string::npos);
    CHECK(error_of(R"({"rope_type": "longrope", "short_factor": [1, 1], "long_factor": [1]})")
              .find("short_factor has 2 entries, long_factor 1") != std::string::npos);
    CHECK(error_of(R"({"rope_type": "longrope", "short_factor": [1, 0], "long_factor": [1, 1]})")
              .find("short_factor 0 is not positive") != std::string::npos);
    // Factors for a different number of rotated pairs than the head has: an Error when the model is built.
    const auto config = luminal::io::parse_model_config(
        luminal::io::parse_json(std::string("{") + kLlamaSizes +
                                    R"(, "rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1],
                                       "long_factor": [2, 2], "original_max_position_embeddings": 16}})",
                                "config"),
        "config");
    CHECK_THROWS_WITH_AS(luminal::nn::build_causal_lm(config), doctest::Contains("longrope has 2 factors for 4"),
                         luminal::Error);
}

// Gemma 4 as its small models (E2B, E4B) are built, against transformers
// (tests/data/variants/gemma4_small, from tools/gen_variant_fixtures.py):
// per-layer input embeddings and KV sharing with double-wide MLPs.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>

namespace {

const std::filesystem::path kGemma4Small = luminal_test::data_dir() / "variants" / "gemma4_small";

}  // namespace

TEST_CASE("gemma4 with per-layer inputs and KV sharing matches transformers: prefill and greedy decode") {
    const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(kGemma4Small);
    const luminal::io::ModelConfig config = luminal::io::load_model_config(kGemma4Small);
    REQUIRE(config.gemma->hidden_size_per_layer_input > 0);
    REQUIRE(config.gemma->num_kv_shared_layers > 0);
    luminal_test::check_against_reference(
        config, [&](auto& session) { session.load_weights(weights); }, kGemma4Small / "reference.safetensors");
}

TEST_CASE("gemma4 KV sharing without an earlier layer of the same kind is an Error") {
    luminal::io::ModelConfig config = luminal::io::load_model_config(kGemma4Small);
    // Layers 0 and 1 produce; sharing three layers leaves no full-attention producer before layer 1.
    config.gemma->num_kv_shared_layers = 3;
    CHECK_THROWS_WITH_AS(luminal::nn::build_causal_lm(config),
                         doctest::Contains("layer 1 shares the keys and values of an earlier full layer"),
                         luminal::Error);
}

// config.json parsing against transformers' own reading of the same files
// (tests/data/configs/*/expected.json, written by tools/gen_config_fixtures.py).
#include "luminal/io/model_config.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "parser_checks.hpp"

namespace {

using luminal::io::AttentionKind;
using luminal::io::Json;
using luminal::io::ModelConfig;

const std::filesystem::path kConfigs = luminal_test::data_dir() / "configs";

using parser_checks::read_json;

template <typename T>
std::optional<T> optional_of(const Json& value) {
    if (value.is_null()) return std::nullopt;
    return value.get<T>();
}

void check_rope(const luminal::io::RopeConfig& rope, const Json& expected) {
    CHECK(luminal::io::rope_type_name(rope.type) == expected["type"].get<std::string>());
    CHECK(rope.theta == expected["theta"].get<double>());
    CHECK(rope.partial_rotary_factor == expected["partial_rotary_factor"].get<double>());
    if (expected.contains("factor")) CHECK(rope.factor == expected["factor"].get<double>());
    if (expected.contains("low_freq_factor")) {
        CHECK(rope.low_freq_factor == expected["low_freq_factor"].get<double>());
        CHECK(rope.high_freq_factor == expected["high_freq_factor"].get<double>());
        CHECK(rope.original_max_position_embeddings ==
              expected["original_max_position_embeddings"].get<std::int64_t>());
    }
}

void check_against_transformers(const ModelConfig& config, const Json& expected) {
    CHECK(config.model_type == expected["model_type"].get<std::string>());
    CHECK(config.vocab_size == expected["vocab_size"].get<std::int64_t>());
    CHECK(config.hidden_size == expected["hidden_size"].get<std::int64_t>());
    CHECK(config.intermediate_size == expected["intermediate_size"].get<std::int64_t>());
    CHECK(config.num_hidden_layers == expected["num_hidden_layers"].get<std::int64_t>());
    CHECK(config.num_attention_heads == expected["num_attention_heads"].get<std::int64_t>());
    CHECK(config.max_position_embeddings == expected["max_position_embeddings"].get<std::int64_t>());
    CHECK(config.rms_norm_eps == expected["rms_norm_eps"].get<double>());
    CHECK(config.hidden_act == expected["hidden_act"].get<std::string>());
    CHECK(config.tie_word_embeddings == expected["tie_word_embeddings"].get<bool>());
    CHECK(config.attention_bias == expected["attention_bias"].get<bool>());
    CHECK(config.bos_token_id == optional_of<std::int64_t>(expected["bos_token_id"]));
    CHECK(config.eos_token_ids == expected["eos_token_ids"].get<std::vector<std::int64_t>>());
    CHECK(config.sliding_window == optional_of<std::int64_t>(expected["sliding_window"]));

    const Json& layers = expected["layers"];
    REQUIRE(config.layers.size() == layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
        INFO("layer " << i);
        const auto& layer = config.layers[i];
        CHECK((layer.attention == AttentionKind::Sliding) == (layers[i]["attention"] == "sliding"));
        CHECK(layer.head_dim == layers[i]["head_dim"].get<std::int64_t>());
        CHECK(layer.num_key_value_heads == layers[i]["num_key_value_heads"].get<std::int64_t>());
        CHECK(layer.moe == layers[i]["moe"].get<bool>());
        check_rope(layer.rope, layers[i]["rope"]);
    }

    REQUIRE(config.moe.has_value() == expected.contains("moe"));
    if (config.moe) {
        const Json& moe = expected["moe"];
        CHECK(config.moe->num_experts == moe["num_experts"].get<std::int64_t>());
        CHECK(config.moe->top_k == moe["top_k"].get<std::int64_t>());
        CHECK(config.moe->intermediate_size == moe["intermediate_size"].get<std::int64_t>());
        CHECK(config.moe->norm_topk_prob == moe["norm_topk_prob"].get<bool>());
    }
    REQUIRE(config.gemma.has_value() == expected.contains("final_logit_softcapping"));
    if (config.gemma) {
        CHECK(config.gemma->final_logit_softcapping == optional_of<double>(expected["final_logit_softcapping"]));
        if (expected.contains("query_pre_attn_scalar")) {
            CHECK(config.gemma->query_pre_attn_scalar == expected["query_pre_attn_scalar"].get<double>());
            CHECK(config.gemma->attn_logit_softcapping == optional_of<double>(expected["attn_logit_softcapping"]));
        }
        if (expected.contains("attention_k_eq_v")) {
            CHECK(config.gemma->attention_k_eq_v == expected["attention_k_eq_v"].get<bool>());
            CHECK(config.gemma->num_kv_shared_layers == expected["num_kv_shared_layers"].get<std::int64_t>());
            CHECK(config.gemma->hidden_size_per_layer_input ==
                  expected["hidden_size_per_layer_input"].get<std::int64_t>());
            CHECK(config.gemma->use_double_wide_mlp == expected["use_double_wide_mlp"].get<bool>());
        }
    }
}

// Parses `text` as a config.json and returns the error message ("" if none).
std::string error_of(const std::string& text) {
    try {
        luminal::io::parse_model_config(luminal::io::parse_json(text, "config.json"), "config.json");
    } catch (const luminal::Error& error) {
        return error.what();
    }
    return "";
}

const char* kLlama = R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4)";

}  // namespace

TEST_CASE("config.json of every fixture reads as transformers reads it") {
    int cases = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
        INFO("case " << entry.path().filename().string());
        const ModelConfig config = luminal::io::load_model_config(entry.path());
        check_against_transformers(config, read_json(entry.path() / "expected.json"));
        ++cases;
    }
    CHECK(cases == 13);
}

TEST_CASE("families and their distinguishing features") {
    using luminal::io::ModelFamily;
    const auto llama = luminal::io::load_model_config(kConfigs / "llama31_8b" / "config.json");
    CHECK(llama.family == ModelFamily::Llama);
    CHECK_FALSE(llama.qk_norm);
    CHECK(llama.layers[0].rope.type == luminal::io::RopeType::Llama3);

    const auto qwen = luminal::io::load_model_config(kConfigs / "qwen3_4b");
    CHECK(qwen.family == ModelFamily::Qwen3);
    CHECK(qwen.qk_norm);

    const auto gemma3 = luminal::io::load_model_config(kConfigs / "gemma3_4b_it");
    CHECK(gemma3.family == ModelFamily::Gemma3);
    CHECK(gemma3.layers[5].rope.type == luminal::io::RopeType::Linear);
    CHECK(gemma3.layers[0].rope.type == luminal::io::RopeType::Default);

    const auto gemma4 = luminal::io::load_model_config(kConfigs / "gemma4_moe_hub");
    CHECK(gemma4.family == ModelFamily::Gemma4);
    CHECK(gemma4.gemma->attention_k_eq_v);
    CHECK(gemma4.layers[5].head_dim == 512);
    CHECK(gemma4.layers[5].num_key_value_heads == 2);
    CHECK(gemma4.layers[4].head_dim == 256);

    const auto moe = luminal::io::load_model_config(kConfigs / "qwen3_moe_saved");
    CHECK(moe.family == ModelFamily::Qwen3Moe);
    CHECK(moe.moe->num_experts == 6);
}

TEST_CASE("config errors name the field and the value") {
    CHECK(error_of(std::string(kLlama) + "}").empty());
    CHECK(error_of(R"({"model_type": "llama", "hidden_size": 64})").find("missing required field 'vocab_size'") !=
          std::string::npos);
    CHECK(error_of(std::string(kLlama) + R"(, "num_key_value_heads": "four"})")
              .find("field 'num_key_value_heads' must be an integer") != std::string::npos);
    CHECK(error_of(std::string(kLlama) + R"(, "num_key_value_heads": 3})")
              .find("num_attention_heads 4 is not a multiple of num_key_value_heads 3") != std::string::npos);
    CHECK(error_of(std::string(kLlama) + R"(, "rope_scaling": {"rope_type": "ntk-by-parts", "factor": 4.0}})")
              .find("rope_type 'ntk-by-parts' is not supported (supported: default, linear, llama3, proportional, "
                    "yarn, dynamic, longrope)") != std::string::npos);
    CHECK(error_of(std::string(kLlama) + R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})")
              .find("rope_scaling: missing required field 'low_freq_factor'") != std::string::npos);
    CHECK(error_of(R"({"model_type": "mamba"})").find("model_type 'mamba' is not supported") != std::string::npos);
    CHECK(error_of(R"({"vocab_size": 3})").find("missing required field 'model_type'") != std::string::npos);
    CHECK(error_of(R"([1, 2])").find("config must be a JSON object, got array") != std::string::npos);
    CHECK(error_of(R"({"model_type": "gemma3", "text_config": 7})").find("text_config") != std::string::npos);
    CHECK(error_of(R"({"model_type": "gemma3_text", "layer_types": ["full_attention"]})")
              .find("layer_types has 1 entries for num_hidden_layers = 26") != std::string::npos);
    CHECK(error_of(R"({"model_type": "gemma3_text", "hidden_size": -5})")
              .find("field 'hidden_size' must be positive, got -5") != std::string::npos);
    CHECK(error_of(R"({"model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_experts": 4,
        "num_experts_per_tok": 6, "moe_intermediate_size": 8})")
              .find("num_experts_per_tok 6 exceeds num_experts 4") != std::string::npos);
    CHECK(error_of(std::string(kLlama) + R"(, "vocab_size": 1e30})").find("'vocab_size' must be an integer in range") !=
          std::string::npos);
}

TEST_CASE("config files: missing file, directory without config, malformed JSON") {
    const auto dir = std::filesystem::temp_directory_path() / "luminal_test_model_config";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    CHECK_THROWS_WITH_AS(luminal::io::load_model_config(dir), doctest::Contains("no such file"), luminal::Error);
    std::ofstream(dir / "config.json") << R"({"model_type": "llama", "vocab_size": )";
    CHECK_THROWS_WITH_AS(luminal::io::load_model_config(dir), doctest::Contains("not valid JSON"), luminal::Error);
    std::filesystem::remove_all(dir);
}

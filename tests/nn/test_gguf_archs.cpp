// GGUF files beyond plain Llama, written as llama.cpp's converter writes them
// (tests/data/gguf_arch, from tools/gen_gguf_arch_fixtures.py), opened as a
// user would and checked against transformers on the same (f16-rounded)
// weights: qwen2, qwen3, qwen3moe and gemma3 files, a Llama 3.1 file with its
// rope_freqs tensor and a Llama with a SentencePiece tokenizer. The greedy ids
// must also be llama.cpp's (recorded by the generator with llama-cpp-python),
// for every file llama.cpp loads.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kGgufArch = luminal_test::data_dir() / "gguf_arch";

// check_pretrained, and then the greedy ids against llama.cpp's where the
// generator recorded them: llama.cpp loads every fixture but qwen3moe.
void check_gguf(const std::string& name, bool llama_cpp_loads = true) {
    const auto folder = kGgufArch / name;
    const std::vector<std::int32_t> picked = luminal_test::check_pretrained(folder / "model.gguf");
    const auto reference = luminal::io::SafetensorsFile::open(folder / "reference.safetensors");
    REQUIRE(reference.contains("llama_cpp_generated_ids") == llama_cpp_loads);
    if (!llama_cpp_loads) return;
    const auto llama_cpp = luminal::io::to_vector<std::int64_t>(reference.at("llama_cpp_generated_ids"));
    CHECK(std::vector<std::int64_t>(picked.begin(), picked.end()) == llama_cpp);
}

}  // namespace

TEST_CASE("a qwen2 GGUF file (q/k/v biases, unbiased output projection) matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen2" / "model.gguf");
    CHECK(pretrained.config().attention_bias);
    CHECK_FALSE(pretrained.config().attention_output_bias);
    check_gguf("qwen2");
}

TEST_CASE("a qwen3 GGUF file matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen3" / "model.gguf");
    CHECK(pretrained.config().family == luminal::io::ModelFamily::Qwen3);
    CHECK(pretrained.config().layers[0].head_dim == 16);
    check_gguf("qwen3");
}

// llama.cpp's qwen3moe wants a router in every layer, so it cannot load this file.
TEST_CASE("a qwen3moe GGUF file (stacked experts, a dense layer between) matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen3moe" / "model.gguf");
    REQUIRE(pretrained.config().moe.has_value());
    CHECK(pretrained.config().moe->num_experts == 4);
    CHECK(pretrained.config().layers[0].moe);
    CHECK_FALSE(pretrained.config().layers[1].moe);
    check_gguf("qwen3moe", false);
}

TEST_CASE("a Llama 3.1 GGUF file with rope_freqs matches transformers' llama3 RoPE") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "llama31" / "model.gguf");
    CHECK(pretrained.config().layers[0].rope.frequency_factors.size() == 4);
    check_gguf("llama31");
}

TEST_CASE("a gemma3 GGUF file matches transformers' Gemma3ForCausalLM and llama.cpp") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "gemma3" / "model.gguf");
    const luminal::io::ModelConfig& config = pretrained.config();
    CHECK(config.family == luminal::io::ModelFamily::Gemma3);
    CHECK(config.hidden_act == "gelu_pytorch_tanh");
    CHECK(config.tie_word_embeddings);
    CHECK(config.sliding_window == 4);
    REQUIRE(config.gemma.has_value());
    CHECK(config.gemma->query_pre_attn_scalar == 8);  // the head size: llama.cpp's rule below 62 layers
    CHECK(config.gemma->final_logit_softcapping == 30.0);
    REQUIRE(config.layers.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
        CAPTURE(i);
        const bool global = i == 5;  // every sixth layer, as llama.cpp assumes for gemma3
        CHECK((config.layers[i].attention == luminal::io::AttentionKind::Full) == global);
        CHECK(config.layers[i].rope.theta == (global ? 1e6 : 5e4));
    }
    // Stored as 1 + w by the converter, read back as transformers' w.
    pretrained.with_checkpoint([](const auto& checkpoint) {
        const auto stored = luminal::io::GgufFile::open(kGgufArch / "gemma3" / "model.gguf");
        const auto shifted = luminal::io::dequantize(stored.at("blk.0.post_ffw_norm.weight"));
        const auto weights = checkpoint.values("model.layers.0.post_feedforward_layernorm.weight");
        REQUIRE(weights.size() == shifted.size());
        for (std::size_t i = 0; i < weights.size(); ++i) CHECK(weights[i] == doctest::Approx(shifted[i] - 1.0f));
        CHECK_FALSE(checkpoint.bytes_as("model.norm.weight", luminal::DType::F32).has_value());
    });
    check_gguf("gemma3");
}

TEST_CASE("a Llama GGUF file with a SentencePiece tokenizer matches transformers and llama.cpp") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "llama2" / "model.gguf");
    CHECK_FALSE(pretrained.config().tie_word_embeddings);
    CHECK(pretrained.tokenizer().vocab_size() == 512);
    check_gguf("llama2");
}

TEST_CASE("a GGUF file of an architecture luminal does not run is an Error naming it") {
    std::string bytes = luminal::io::read_text_file(kGgufArch / "qwen3" / "model.gguf");
    const std::string from = "qwen3", to = "qwen9";  // general.architecture's value, same length
    const auto at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, from.size(), to);
    const auto path = std::filesystem::temp_directory_path() / "luminal_test_arch.gguf";
    std::ofstream(path, std::ios::binary) << bytes;
    CHECK_THROWS_WITH_AS(luminal::nn::PretrainedModel::open(path),
                         doctest::Contains("general.architecture 'qwen9' is not supported"), luminal::Error);
    std::filesystem::remove(path);
}

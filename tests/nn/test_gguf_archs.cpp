// GGUF files beyond plain Llama, written as llama.cpp's converter writes them
// (tests/data/gguf_arch, from tools/gen_gguf_arch_fixtures.py), opened as a
// user would and checked against transformers on the same (f16-rounded)
// weights: qwen2, qwen3 and qwen3moe files and a Llama 3.1 file with its
// rope_freqs tensor.
#include "model_reference.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <luminal/luminal.hpp>
#include <string>

namespace {

const std::filesystem::path kGgufArch = std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "gguf_arch";

}  // namespace

TEST_CASE("a qwen2 GGUF file (q/k/v biases, unbiased output projection) matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen2" / "model.gguf");
    CHECK(pretrained.config().attention_bias);
    CHECK_FALSE(pretrained.config().attention_output_bias);
    luminal_test::check_pretrained(kGgufArch / "qwen2" / "model.gguf");
}

TEST_CASE("a qwen3 GGUF file matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen3" / "model.gguf");
    CHECK(pretrained.config().family == luminal::io::ModelFamily::Qwen3);
    CHECK(pretrained.config().layers[0].head_dim == 16);
    luminal_test::check_pretrained(kGgufArch / "qwen3" / "model.gguf");
}

TEST_CASE("a qwen3moe GGUF file (stacked experts, a dense layer between) matches transformers") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "qwen3moe" / "model.gguf");
    REQUIRE(pretrained.config().moe.has_value());
    CHECK(pretrained.config().moe->num_experts == 4);
    CHECK(pretrained.config().layers[0].moe);
    CHECK_FALSE(pretrained.config().layers[1].moe);
    luminal_test::check_pretrained(kGgufArch / "qwen3moe" / "model.gguf");
}

TEST_CASE("a Llama 3.1 GGUF file with rope_freqs matches transformers' llama3 RoPE") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kGgufArch / "llama31" / "model.gguf");
    CHECK(pretrained.config().layers[0].rope.frequency_factors.size() == 4);
    luminal_test::check_pretrained(kGgufArch / "llama31" / "model.gguf");
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

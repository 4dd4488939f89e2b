// A model whose vocabulary is padded past its tokenizer (tests/data/variants/
// qwen3_padded_vocab, from tools/gen_variant_fixtures.py: 320 logits, 300
// tokens). Unconstrained greedy decoding follows transformers through padded
// ids and the streaming decoder skips them, as the tokenizers package does; a
// sampler restricted to decodable ids follows transformers' greedy run with the
// padded ids suppressed.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kPaddedVocab =
    luminal_test::data_dir() / "variants" / "qwen3_padded_vocab";

std::string stream_text(const luminal::io::Tokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
    luminal::io::StreamingDecoder stream(tokenizer, true);
    std::string text;
    for (const std::int32_t id : ids) text += stream.step(id);
    return text + stream.finish();
}

}  // namespace

TEST_CASE("padded vocabulary: raw greedy ids go through padded ids, which decode to nothing") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kPaddedVocab);
    const luminal::io::Json expected =
        luminal::io::parse_json(luminal::io::read_text_file(kPaddedVocab / "reference.json"), "reference.json");
    const auto tokenizer_size = expected["tokenizer_size"].get<std::int32_t>();
    REQUIRE(pretrained.tokenizer().vocab_size() == tokenizer_size);
    REQUIRE(pretrained.config().vocab_size > tokenizer_size);

    luminal::nn::Sampler raw(0, 0, 0);
    const std::vector<std::int32_t> ids = luminal_test::check_against_reference(
        pretrained.config(), [&](auto& session) { session.load_weights(pretrained); },
        kPaddedVocab / "reference.safetensors", [&](std::span<const float> row) { return raw(row); });
    // The fixture is chosen so that this run picks padded ids.
    CHECK(std::count_if(ids.begin(), ids.end(), [&](std::int32_t id) { return id >= tokenizer_size; }) >= 2);
    CHECK(stream_text(pretrained.tokenizer(), ids) == expected["raw_text"].get<std::string>());
}

TEST_CASE("padded vocabulary: a sampler restricted to decodable ids never picks a padded one") {
    const auto pretrained = luminal::nn::PretrainedModel::open(kPaddedVocab);
    const luminal::io::Json expected =
        luminal::io::parse_json(luminal::io::read_text_file(kPaddedVocab / "reference.json"), "reference.json");
    const std::vector<bool> decodable =
        luminal::nn::decodable_ids(pretrained.tokenizer(), pretrained.config().vocab_size);
    REQUIRE(decodable.size() == static_cast<std::size_t>(pretrained.config().vocab_size));

    luminal::nn::Sampler greedy(0, 0, 0, decodable);
    const std::vector<std::int32_t> ids = luminal_test::check_against_reference(
        pretrained.config(), [&](auto& session) { session.load_weights(pretrained); },
        kPaddedVocab / "reference.safetensors", [&](std::span<const float> row) { return greedy(row); },
        "pickable_");
    CHECK(stream_text(pretrained.tokenizer(), ids) == expected["pickable_text"].get<std::string>());

    // Sampling at a temperature keeps to the decodable ids too.
    const auto reference = luminal::io::SafetensorsFile::open(kPaddedVocab / "reference.safetensors");
    const std::vector<float> logits = luminal::io::to_f32(reference.at("decode_logits"));
    const std::size_t vocab = decodable.size();
    luminal::nn::Sampler hot(5.0, 0, 7, decodable), unrestricted(5.0, 0, 7);
    int padded_unrestricted = 0;
    for (std::size_t row = 0; row * vocab < logits.size(); ++row)
        for (int draw = 0; draw < 50; ++draw) {
            const auto logits_row = std::span(logits).subspan(row * vocab, vocab);
            REQUIRE(decodable[static_cast<std::size_t>(hot(logits_row))]);
            padded_unrestricted += decodable[static_cast<std::size_t>(unrestricted(logits_row))] ? 0 : 1;
        }
    CHECK(padded_unrestricted > 0);  // at this temperature the padded ids are in reach
}

TEST_CASE("sampler: a mask that allows nothing is an Error") {
    CHECK_THROWS_WITH_AS(luminal::nn::Sampler(0, 0, 0, std::vector<bool>(4, false)),
                         doctest::Contains("allows no id"), luminal::Error);
    luminal::nn::Sampler beyond(0, 0, 0, {false, false, false, false, true});
    const std::vector<float> logits{1, 2, 3, 4};
    CHECK_THROWS_WITH_AS(beyond(logits), doctest::Contains("none of the 4 logits"), luminal::Error);
}

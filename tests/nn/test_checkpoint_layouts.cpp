// Checkpoint layouts users download, loaded through PretrainedModel as a user
// would and checked against transformers (tests/data/variants, from
// tools/gen_variant_fixtures.py): multimodal Gemma 3 and Gemma 4 directories,
// whose text model is run and whose vision tensors are left out.
#include "model_reference.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kVariants = std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "variants";

}  // namespace

TEST_CASE("multimodal Gemma 3 (language_model.model.*, as published) runs its text model like transformers") {
    luminal_test::check_pretrained(kVariants / "gemma3_multimodal");
}

TEST_CASE("multimodal Gemma 4 (model.language_model.*) runs its text model like transformers") {
    luminal_test::check_pretrained(kVariants / "gemma4_multimodal");
}

TEST_CASE("text layout: prefixes mapped, other modalities left out, anything else kept for binding to report") {
    using luminal::nn::TextLayout;
    CHECK_FALSE(TextLayout::detect({"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));

    const auto published = TextLayout::detect({"language_model.model.embed_tokens.weight",
                                               "language_model.lm_head.weight", "vision_tower.vision_model.x",
                                               "multi_modal_projector.mm_input_projection_weight"});
    REQUIRE(published);
    CHECK(published->other_modality_tensors() == 2);
    CHECK(published->stored_names() ==
          std::map<std::string, std::string, std::less<>>{
              {"model.embed_tokens.weight", "language_model.model.embed_tokens.weight"},
              {"lm_head.weight", "language_model.lm_head.weight"}});

    const auto gemma4 = TextLayout::detect({"model.language_model.layers.0.layer_scalar", "model.vision_tower.a",
                                            "model.embed_vision.b", "model.audio_tower.c", "model.embed_audio.d",
                                            "model.unknown_tower.e"});
    REQUIRE(gemma4);
    CHECK(gemma4->other_modality_tensors() == 4);
    CHECK(gemma4->stored_names() ==
          std::map<std::string, std::string, std::less<>>{
              {"model.layers.0.layer_scalar", "model.language_model.layers.0.layer_scalar"},
              {"model.unknown_tower.e", "model.unknown_tower.e"}});

    CHECK_THROWS_WITH_AS(TextLayout::detect({"language_model.model.norm.weight", "model.language_model.norm.weight"}),
                         doctest::Contains("both the text model's 'model.norm.weight'"), luminal::Error);
}

TEST_CASE("a multimodal checkpoint with a tensor of no known part names it as unused") {
    const auto source = kVariants / "gemma4_multimodal";
    const auto dir = std::filesystem::temp_directory_path() / "luminal_test_multimodal_extra";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(source / "config.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(source / "tokenizer.json", dir / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
    const auto file = luminal::io::SafetensorsFile::open(source / "model.safetensors");
    std::vector<luminal::io::SafetensorsRecord> records;
    for (const auto& t : file.tensors()) records.push_back({t.name, t.stored_dtype, t.shape, t.bytes});
    records.push_back({"model.unknown_tower.weight", records[0].dtype, records[0].shape, records[0].bytes});
    luminal::io::write_safetensors(dir / "model.safetensors", records);

    const auto pretrained = luminal::nn::PretrainedModel::open(dir);
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(pretrained.config(), {.context = 8});
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
    CHECK_THROWS_WITH_AS(session.load_weights(pretrained),
                         doctest::Contains("1 tensor(s) the model does not use: model.unknown_tower.weight"),
                         luminal::Error);
    std::filesystem::remove_all(dir);
}

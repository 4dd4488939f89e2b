// Checkpoint layouts users download, loaded through PretrainedModel as a user
// would and checked against transformers (tests/data/variants, from
// tools/gen_variant_fixtures.py): multimodal Gemma 3 and Gemma 4 directories,
// whose text model is run and whose vision tensors are left out; and what
// binding a mapped file hands the runtime.
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <luminal/luminal.hpp>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kVariants = luminal_test::data_dir() / "variants";

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

namespace {

// What ParameterSet::bind hands a runtime, by parameter name.
struct BindingRecorder {
    std::map<std::string, std::vector<std::byte>> copied;
    std::map<std::string, const std::byte*> borrowed;
    std::map<std::string, std::vector<float>> values;

    void set_data(const luminal::GraphTensor& t, const std::vector<float>& v) { values[label(t)] = v; }
    void set_bytes(const luminal::GraphTensor& t, std::span<const std::byte> b) { copied[label(t)].assign(b.begin(), b.end()); }
    void borrow_bytes(const luminal::GraphTensor& t, std::span<const std::byte> b, std::shared_ptr<const void> owner) {
        CHECK(owner != nullptr);
        borrowed[label(t)] = b.data();
    }
    static std::string label(const luminal::GraphTensor& t) { return t.graph().node(t.id()).op.label; }
};

std::span<const std::byte> byte_view(const auto& v) { return std::as_bytes(std::span(v)); }

}  // namespace

TEST_CASE("binding a mapped safetensors file: tensors in the model's dtype read in place, stacked parts copied as "
          "stored, other dtypes through their values") {
    using luminal::io::SafetensorsDType;
    const std::vector<std::uint16_t> w{1, 2, 3, 4, 5, 6}, e0{7, 8, 9, 10}, e1{11, 12, 13, 14};
    const std::vector<float> g0{0.5f, -1.0f}, g1{2.0f, 4.0f};
    const auto dir = std::filesystem::temp_directory_path() / "luminal_test_mapped_binding";
    std::filesystem::create_directories(dir);
    const std::vector<luminal::io::SafetensorsRecord> records{{"w", SafetensorsDType::BF16, {2, 3}, byte_view(w)},
                                                              {"e.0", SafetensorsDType::BF16, {2, 2}, byte_view(e0)},
                                                              {"e.1", SafetensorsDType::BF16, {2, 2}, byte_view(e1)},
                                                              {"g.0", SafetensorsDType::F32, {2}, byte_view(g0)},
                                                              {"g.1", SafetensorsDType::F32, {2}, byte_view(g1)}};
    luminal::io::write_safetensors(dir / "model.safetensors", records);
    const auto model = std::make_shared<const luminal::io::SafetensorsModel>(luminal::io::SafetensorsModel::open(dir));
    luminal::Graph cx;
    luminal::nn::ParameterSet parameters;
    parameters.add(cx, "w", {2, 3}, luminal::DType::BF16);
    parameters.add_stacked(cx, "e", {"e.0", "e.1"}, {2, 2}, luminal::DType::BF16);
    parameters.add_stacked(cx, "g", {"g.0", "g.1"}, {2}, luminal::DType::BF16);

    BindingRecorder mapped;
    parameters.bind(mapped, luminal::nn::SafetensorsCheckpoint(*model, model));
    CHECK(mapped.borrowed == std::map<std::string, const std::byte*>{{"w", model->find("w")->bytes.data()}});
    std::vector<std::byte> experts(byte_view(e0).begin(), byte_view(e0).end());
    experts.insert(experts.end(), byte_view(e1).begin(), byte_view(e1).end());
    CHECK(mapped.copied == std::map<std::string, std::vector<std::byte>>{{"e", experts}});
    CHECK(mapped.values == std::map<std::string, std::vector<float>>{{"g", {0.5f, -1.0f, 2.0f, 4.0f}}});
    // The copied parts' pages went back to the kernel; read again, they are the file's.
    CHECK(std::ranges::equal(model->find("e.1")->bytes, byte_view(e1)));

    BindingRecorder unmapped;  // no owner: the runtime gets copies
    parameters.bind(unmapped, luminal::nn::SafetensorsCheckpoint(*model));
    CHECK(unmapped.borrowed.empty());
    CHECK(unmapped.copied.at("w") == std::vector<std::byte>(byte_view(w).begin(), byte_view(w).end()));
    std::filesystem::remove_all(dir);
}

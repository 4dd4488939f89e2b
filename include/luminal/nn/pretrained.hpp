#pragma once
// A model on disk in either form users have: a Hugging Face directory
// (config.json, model.safetensors or its index, tokenizer.json) or a single
// GGUF file, which carries its config and tokenizer as metadata. Both give the
// same ModelConfig, Tokenizer and chat format, and a Checkpoint in Hugging Face
// naming, so everything downstream is the same code. A multimodal directory
// (Gemma 3/4 *ForConditionalGeneration) gives its text model; opening it says
// once on stderr that the other modalities' tensors are left out.
#include "luminal/core/error.hpp"
#include "luminal/io/chat_template.hpp"
#include "luminal/io/gguf.hpp"
#include "luminal/io/gguf_model_config.hpp"
#include "luminal/io/gguf_tokenizer.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/model_config.hpp"
#include "luminal/io/safetensors_model.hpp"
#include "luminal/io/tokenizer.hpp"
#include "luminal/nn/checkpoint.hpp"
#include "luminal/nn/gguf_checkpoint.hpp"
#include "luminal/nn/text_checkpoint.hpp"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace luminal::nn {

class PretrainedModel {
public:
    // A directory is read as a Hugging Face model, a file as GGUF.
    static PretrainedModel open(const std::filesystem::path& path) {
        if (std::filesystem::is_directory(path)) return open_directory(path);
        check(std::filesystem::is_regular_file(path), path.string().c_str(),
              "no such model: expected a Hugging Face model directory or a .gguf file");
        io::GgufFile file = io::GgufFile::open(path);
        io::ModelConfig config = io::gguf_model_config(file.view());
        io::Tokenizer tokenizer = io::gguf_tokenizer(file.view());
        std::optional<io::ChatFamily> chat;
        if (file.metadata().contains("tokenizer.chat_template"))
            chat = io::chat_family_of_template(file.metadata().get_string("tokenizer.chat_template"));
        return PretrainedModel(path, std::move(config), std::move(tokenizer), chat,
                               std::make_shared<const io::GgufFile>(std::move(file)));
    }

    const std::filesystem::path& path() const { return path_; }
    const io::ModelConfig& config() const { return config_; }
    const io::Tokenizer& tokenizer() const { return tokenizer_; }
    // The format the model's chat template writes; without a recognised
    // template, the usual one of its family.
    io::ChatFamily chat_family() const { return chat_family_; }

    // Calls `use` with the weights as a Checkpoint.
    template <typename Use>
    decltype(auto) with_checkpoint(Use&& use) const {
        if (const auto* safetensors = std::get_if<std::shared_ptr<const io::SafetensorsModel>>(&weights_)) {
            SafetensorsCheckpoint checkpoint(**safetensors, *safetensors);
            if (text_layout_) return use(TextCheckpoint(std::move(checkpoint), *text_layout_));
            return use(std::move(checkpoint));
        }
        const auto& gguf = std::get<std::shared_ptr<const io::GgufFile>>(weights_);
        return use(GgufCheckpoint(*gguf, config_, gguf));
    }

    // The weight matrices stored in a block format luminal keeps quantized
    // (ModelOptions::quantized); none for a Hugging Face directory.
    std::map<std::string, QuantFormat, std::less<>> quantized_weights() const {
        if (std::holds_alternative<std::shared_ptr<const io::SafetensorsModel>>(weights_)) return {};
        return GgufCheckpoint(*std::get<std::shared_ptr<const io::GgufFile>>(weights_), config_).quantized_formats();
    }

private:
    // The files are shared with the runtimes that read their tensors in place.
    using Weights = std::variant<std::shared_ptr<const io::SafetensorsModel>, std::shared_ptr<const io::GgufFile>>;

    PretrainedModel(std::filesystem::path path, io::ModelConfig config, io::Tokenizer tokenizer,
                    std::optional<io::ChatFamily> chat, Weights weights)
        : path_(std::move(path)), config_(std::move(config)), tokenizer_(std::move(tokenizer)),
          chat_family_(chat.value_or(family_chat(config_.family))), weights_(std::move(weights)) {}

    static PretrainedModel open_directory(const std::filesystem::path& dir) {
        io::ModelConfig config = io::load_model_config(dir);
        io::Tokenizer tokenizer = io::Tokenizer::from_file(dir / "tokenizer.json");
        std::optional<io::ChatFamily> chat;
        const auto tokenizer_config = dir / "tokenizer_config.json";
        if (std::filesystem::exists(tokenizer_config)) {
            const io::Json json = io::parse_json(io::read_text_file(tokenizer_config), tokenizer_config.string());
            if (const auto jinja = json.find("chat_template"); jinja != json.end() && jinja->is_string())
                chat = io::chat_family_of_template(jinja->get<std::string>());
        }
        io::SafetensorsModel weights = io::SafetensorsModel::open(dir);
        std::optional<TextLayout> layout = TextLayout::detect(SafetensorsCheckpoint(weights).tensor_names());
        if (layout)
            std::fprintf(stderr, "luminal: %s is a multimodal checkpoint: loading its text model, ignoring %zu "
                         "vision/audio tensor(s)\n", dir.string().c_str(), layout->other_modality_tensors());
        PretrainedModel model(dir, std::move(config), std::move(tokenizer), chat,
                              std::make_shared<const io::SafetensorsModel>(std::move(weights)));
        model.text_layout_ = std::move(layout);
        return model;
    }

    static io::ChatFamily family_chat(io::ModelFamily family) {
        switch (family) {
            case io::ModelFamily::Llama: return io::ChatFamily::Llama3;
            case io::ModelFamily::Gemma3:
            case io::ModelFamily::Gemma4: return io::ChatFamily::Gemma3;
            case io::ModelFamily::Qwen3:
            case io::ModelFamily::Qwen3Moe: return io::ChatFamily::Qwen3;
        }
        return io::ChatFamily::Qwen3;
    }

    std::filesystem::path path_;
    io::ModelConfig config_;
    io::Tokenizer tokenizer_;
    io::ChatFamily chat_family_;
    Weights weights_;
    std::optional<TextLayout> text_layout_;  // set for a multimodal directory
};

}  // namespace luminal::nn

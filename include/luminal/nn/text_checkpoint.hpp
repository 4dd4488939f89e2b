#pragma once
// The text model inside a multimodal checkpoint. Gemma 3 (4B and larger) and
// every Gemma 4 ship as *ForConditionalGeneration: the language model's
// tensors under a prefix, beside a vision (and, for Gemma 4, audio) tower and
// its projector. Two layouts are in use:
//   language_model.model.layers.0...  language_model.lm_head.weight   (Gemma 3 as published)
//   model.language_model.layers.0...  lm_head.weight                  (transformers >= 4.52, Gemma 4)
// TextLayout finds which one a checkpoint has and maps the text tensors to the
// names a text-only model uses (model.layers.0..., lm_head.weight); the other
// modalities' tensors are left out, counted so the caller can say so. A tensor
// that is neither stays under its own name, so binding reports it as unused.
#include "luminal/core/error.hpp"
#include "luminal/nn/checkpoint.hpp"

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luminal::nn {

class TextLayout {
public:
    // The layout of a checkpoint with these tensor names, or nullopt when it is
    // a text model already (no tensor under a language-model prefix).
    static std::optional<TextLayout> detect(const std::vector<std::string>& names) {
        bool multimodal = false;
        for (const std::string& name : names)
            for (const auto& [stored, text] : prefixes)
                multimodal = multimodal || name.starts_with(stored);
        if (!multimodal) return std::nullopt;
        TextLayout layout;
        for (const std::string& name : names) {
            if (auto text = text_name(name)) {
                const auto [it, inserted] = layout.stored_.emplace(*text, name);
                check(inserted, "checkpoint", "tensors '{}' and '{}' are both the text model's '{}'", it->second, name,
                      *text);
            } else {
                ++layout.other_modalities_;
            }
        }
        return layout;
    }

    // Text-model name -> stored name.
    const std::map<std::string, std::string, std::less<>>& stored_names() const { return stored_; }
    // Tensors of the vision/audio towers and their projectors, left out.
    std::size_t other_modality_tensors() const { return other_modalities_; }

private:
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> prefixes{{
        {"language_model.model.", "model."},
        {"language_model.lm_head.", "lm_head."},
        {"model.language_model.", "model."},
    }};
    static constexpr std::array<std::string_view, 5> modalities{
        "vision_tower.", "multi_modal_projector.", "embed_vision.", "audio_tower.", "embed_audio."};

    // The text model's name of `name`; nullopt for another modality's tensor.
    static std::optional<std::string> text_name(std::string_view name) {
        for (const auto& [stored, text] : prefixes)
            if (name.starts_with(stored)) return std::string(text) + std::string(name.substr(stored.size()));
        const std::string_view inner = name.starts_with("model.") ? name.substr(6) : name;
        for (const std::string_view modality : modalities)
            if (inner.starts_with(modality)) return std::nullopt;
        return std::string(name);
    }

    std::map<std::string, std::string, std::less<>> stored_;
    std::size_t other_modalities_ = 0;
};

// `Inner` seen through a TextLayout: its text tensors under text-model names,
// nothing else.
template <Checkpoint Inner>
class TextCheckpoint {
public:
    TextCheckpoint(Inner inner, const TextLayout& layout) : inner_(std::move(inner)), layout_(layout) {}

    std::string location() const { return inner_.location(); }
    std::vector<std::string> tensor_names() const {
        std::vector<std::string> names;
        for (const auto& [text, stored] : layout_.stored_names()) names.push_back(text);
        return names;
    }
    std::optional<Dims> shape_of(std::string_view name) const {
        const std::string* stored = find(name);
        return stored ? inner_.shape_of(*stored) : std::nullopt;
    }
    std::optional<std::span<const std::byte>> bytes_as(std::string_view name, DType dtype) const {
        return inner_.bytes_as(at(name), dtype);
    }
    std::vector<float> values(std::string_view name) const { return inner_.values(at(name)); }
    std::optional<StoredBlocks> mapped(std::string_view name, DType dtype) const
        requires requires(const Inner& inner, std::string_view n, DType d) { inner.mapped(n, d); }
    {
        return inner_.mapped(at(name), dtype);
    }

private:
    const std::string* find(std::string_view name) const {
        const auto it = layout_.stored_names().find(name);
        return it == layout_.stored_names().end() ? nullptr : &it->second;
    }
    const std::string& at(std::string_view name) const {
        const std::string* stored = find(name);
        check(stored != nullptr, location().c_str(), "no text-model tensor '{}'", name);
        return *stored;
    }

    Inner inner_;
    const TextLayout& layout_;
};

}  // namespace luminal::nn

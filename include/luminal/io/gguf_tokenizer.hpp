#pragma once
// The tokenizer a GGUF file carries in its tokenizer.ggml.* metadata, rebuilt
// as the tokenizer.json document Hugging Face would have for it, so a single
// .gguf file is a complete model. Supported: the byte-level BPE that GGUF calls
// "gpt2" (GPT-2, SmolLM, Llama 3, Qwen 2/3), with the pre-tokenizer named by
// tokenizer.ggml.pre. Control and user-defined tokens become added tokens, so
// they are matched in the text as llama.cpp matches them.
#include "luminal/core/error.hpp"
#include "luminal/io/gguf.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io {

namespace detail {

// llama.cpp's token types (enum llama_token_type).
enum class GgufTokenType : std::int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

inline Json byte_level(bool use_regex) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

inline Json split_then_byte_level(const char* regex) {
    const Json split = {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
    return {{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level(false)})}};
}

// The pre-tokenizer of llama.cpp's pre-tokenizer name, as in the tokenizer.json
// of the models that GGUF conversion gives that name.
inline Json gguf_pre_tokenizer(std::string_view pre, const std::string& where) {
    if (pre == "default" || pre == "gpt-2") return byte_level(true);
    if (pre == "smollm" || pre == "starcoder" || pre == "refact")
        return {{"type", "Sequence"},
                {"pretokenizers",
                 Json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
    if (pre == "llama-bpe" || pre == "llama3")
        return split_then_byte_level(
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
    if (pre == "qwen2")
        return split_then_byte_level(
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
    throw Error(where, fmt::format("tokenizer.ggml.pre '{}' is not supported (supported: default, gpt-2, smollm, "
                                   "starcoder, refact, llama-bpe, qwen2)", pre));
}

inline std::optional<std::int32_t> gguf_token_id(const GgufMetadata& metadata, std::string_view key,
                                                 std::size_t vocab) {
    if (!metadata.contains(key)) return std::nullopt;
    const auto id = metadata.get_integer<std::int32_t>(key);
    check(id >= 0 && static_cast<std::size_t>(id) < vocab, metadata.file().c_str(),
          "metadata key '{}' = {} is outside the vocabulary of {} tokens", key, id, vocab);
    return id;
}

inline bool gguf_flag(const GgufMetadata& metadata, std::string_view key, bool fallback) {
    return metadata.contains(key) ? metadata.get_bool(key) : fallback;
}

// TemplateProcessing that frames the text with the BOS and/or EOS token.
inline Json gguf_post_processor(const GgufMetadata& metadata, std::span<const std::string_view> tokens) {
    Json single = Json::array();
    Json specials = Json::object();
    const auto add = [&](const char* key, bool before) {
        const auto id = gguf_token_id(metadata, key, tokens.size());
        check(id.has_value(), metadata.file().c_str(), "the tokenizer adds a token but '{}' is not set", key);
        const std::string token(tokens[static_cast<std::size_t>(*id)]);
        single.insert(before ? single.begin() : single.end(), Json{{"SpecialToken", {{"id", token}, {"type_id", 0}}}});
        specials[token] = {{"id", token}, {"ids", {*id}}, {"tokens", {token}}};
    };
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    const bool bos = gguf_flag(metadata, "tokenizer.ggml.add_bos_token", false);
    const bool eos = gguf_flag(metadata, "tokenizer.ggml.add_eos_token", false);
    if (!bos && !eos) return nullptr;
    if (bos) add("tokenizer.ggml.bos_token_id", true);
    if (eos) add("tokenizer.ggml.eos_token_id", false);
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

}  // namespace detail

// The tokenizer.json document equivalent to the file's tokenizer metadata.
inline Json gguf_tokenizer_json(const GgufView& file) {
    const GgufMetadata& metadata = file.metadata();
    const std::string& where = metadata.file();
    const std::string_view model = metadata.get_string("tokenizer.ggml.model");
    check(model == "gpt2", where.c_str(),
          "tokenizer.ggml.model '{}' is not supported (luminal reads 'gpt2', byte-level BPE)", model);
    const auto& tokens = metadata.get_array<std::string_view>("tokenizer.ggml.tokens");
    const auto& merges = metadata.get_array<std::string_view>("tokenizer.ggml.merges");
    const std::vector<std::int32_t>* types =
        metadata.contains("tokenizer.ggml.token_type") ? &metadata.get_array<std::int32_t>("tokenizer.ggml.token_type")
                                                       : nullptr;
    check(!tokens.empty(), where.c_str(), "tokenizer.ggml.tokens is empty");
    check(types == nullptr || types->size() == tokens.size(), where.c_str(),
          "tokenizer.ggml.token_type has {} entries for {} tokens", types ? types->size() : 0, tokens.size());

    using detail::GgufTokenType;
    Json vocab = Json::object();
    Json added = Json::array();
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        const std::string token(tokens[id]);
        if (const auto seen = vocab.find(token); seen != vocab.end())
            throw Error(where, fmt::format("token '{}' appears twice in tokenizer.ggml.tokens (ids {} and {})", token,
                                           seen->get<std::int64_t>(), id));
        vocab[token] = id;
        const auto type = types ? static_cast<GgufTokenType>((*types)[id]) : GgufTokenType::Normal;
        if (type == GgufTokenType::Control || type == GgufTokenType::UserDefined)
            added.push_back({{"id", id}, {"content", token}, {"special", type == GgufTokenType::Control},
                             {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    }
    Json bpe = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", Json::array()},
                {"ignore_merges", false}, {"byte_fallback", false}};
    for (const std::string_view merge : merges) bpe["merges"].push_back(merge);
    const std::string_view pre = metadata.contains("tokenizer.ggml.pre") ? metadata.get_string("tokenizer.ggml.pre")
                                                                         : std::string_view("default");
    Json document = {{"version", "1.0"},
                     {"added_tokens", std::move(added)},
                     {"pre_tokenizer", detail::gguf_pre_tokenizer(pre, where)},
                     {"post_processor", detail::gguf_post_processor(metadata, tokens)},
                     {"decoder", detail::byte_level(true)},
                     {"model", std::move(bpe)}};
    if (pre == "qwen2") document["normalizer"] = {{"type", "NFC"}};
    return document;
}

inline Tokenizer gguf_tokenizer(const GgufView& file) {
    return Tokenizer::from_parsed_json(gguf_tokenizer_json(file), file.metadata().file() + ": tokenizer.ggml");
}

}  // namespace luminal::io

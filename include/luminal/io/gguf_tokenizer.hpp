#pragma once
// The tokenizer a GGUF file carries in its tokenizer.ggml.* metadata, rebuilt
// as the tokenizer.json document Hugging Face would have for it, so a single
// .gguf file is a complete model. Supported: the byte-level BPE that GGUF calls
// "gpt2" (GPT-2, SmolLM, Llama 3, Qwen 2/3), with the pre-tokenizer named by
// tokenizer.ggml.pre, and the SentencePiece BPE it calls "llama" (Llama 2,
// Gemma), whose merges follow from tokenizer.ggml.scores. Control,
// user-defined and unknown tokens become added tokens, so they are matched in
// the text as llama.cpp matches them.
#include "luminal/core/error.hpp"
#include "luminal/io/gguf.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer.hpp"
#include "luminal/io/utf8.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
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

// How llama.cpp frames a vocabulary type's text when the metadata does not say:
// whether it adds BOS, and the BOS/EOS ids it assumes.
struct GgufFraming {
    bool add_bos = false;
    std::optional<std::int32_t> bos_id, eos_id;
};

// TemplateProcessing that frames the text with the BOS and/or EOS token.
inline Json gguf_post_processor(const GgufMetadata& metadata, std::span<const std::string_view> tokens,
                                const GgufFraming& defaults) {
    Json single = Json::array();
    Json specials = Json::object();
    const auto add = [&](const char* key, std::optional<std::int32_t> fallback, bool before) {
        auto id = gguf_token_id(metadata, key, tokens.size());
        if (!id && fallback && static_cast<std::size_t>(*fallback) < tokens.size()) id = fallback;
        check(id.has_value(), metadata.file().c_str(), "the tokenizer adds a token but '{}' is not set", key);
        const std::string token(tokens[static_cast<std::size_t>(*id)]);
        single.insert(before ? single.begin() : single.end(), Json{{"SpecialToken", {{"id", token}, {"type_id", 0}}}});
        specials[token] = {{"id", token}, {"ids", {*id}}, {"tokens", {token}}};
    };
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    const bool bos = gguf_flag(metadata, "tokenizer.ggml.add_bos_token", defaults.add_bos);
    const bool eos = gguf_flag(metadata, "tokenizer.ggml.add_eos_token", false);
    if (!bos && !eos) return nullptr;
    if (bos) add("tokenizer.ggml.bos_token_id", defaults.bos_id, true);
    if (eos) add("tokenizer.ggml.eos_token_id", defaults.eos_id, false);
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

// SentencePiece's BPE as llama.cpp's SPM tokenizer runs it: of the adjacent
// symbols whose concatenation is a token, the pair making the best-scored token
// merges first. As BPE merges: every split of every token into two tokens (at
// character boundaries), best score first; equal scores in token order, as
// transformers' GGUF converter orders them (llama.cpp takes the leftmost pair
// there; a SentencePiece vocabulary gives each merged piece its own score).
// Tokens longer than max_merged_length are no merge target: SentencePiece pieces
// are at most 16 characters unless trained otherwise, and the bound keeps a
// hostile file's cost linear in its size.
inline Json sentencepiece_merges(std::span<const std::string_view> tokens, std::span<const float> scores) {
    constexpr std::size_t max_merged_length = 1024;
    absl::flat_hash_map<std::string_view, std::int32_t> ids;
    ids.reserve(tokens.size());
    for (std::size_t id = 0; id < tokens.size(); ++id) ids.emplace(tokens[id], static_cast<std::int32_t>(id));
    struct Split {
        float score;
        std::int32_t merged;
        std::uint32_t left_length;
    };
    std::vector<Split> splits;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        const std::string_view token = tokens[id];
        if (token.size() > max_merged_length) continue;
        for (std::size_t at = 0; at < token.size();) {
            at += std::min(utf8::char_length(token, at), token.size() - at);
            if (at < token.size() && ids.contains(token.substr(0, at)) && ids.contains(token.substr(at)))
                splits.push_back({scores[id], static_cast<std::int32_t>(id), static_cast<std::uint32_t>(at)});
        }
    }
    std::sort(splits.begin(), splits.end(), [](const Split& a, const Split& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.merged != b.merged) return a.merged < b.merged;
        return a.left_length > b.left_length;
    });
    Json merges = Json::array();
    for (const Split& split : splits) {
        const std::string_view token = tokens[static_cast<std::size_t>(split.merged)];
        merges.push_back(Json::array({token.substr(0, split.left_length), token.substr(split.left_length)}));
    }
    return merges;
}

// The parts of a "llama" (SentencePiece) tokenizer.json: spaces become "▁",
// after a "▁" prefix unless tokenizer.ggml.add_space_prefix is false (llama.cpp
// prefixes each stretch of text that starts the input or follows an added token,
// as the Prepend normalizer does); characters no token covers become their
// <0xXX> byte tokens, else the unknown token.
inline void sentencepiece_document(const GgufMetadata& metadata, std::span<const std::string_view> tokens,
                                   Json& document, Json& bpe) {
    constexpr std::string_view metaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
    const std::string& where = metadata.file();
    const std::string_view scores_key = "tokenizer.ggml.scores";
    check(metadata.contains(scores_key), where.c_str(),
          "tokenizer.ggml.model 'llama' needs tokenizer.ggml.scores (its merges follow from them)");
    const auto& scores = metadata.get_array<float>(scores_key);
    check(scores.size() == tokens.size(), where.c_str(), "tokenizer.ggml.scores has {} entries for {} tokens",
          scores.size(), tokens.size());
    for (std::size_t id = 0; id < scores.size(); ++id)
        check(!std::isnan(scores[id]), where.c_str(), "tokenizer.ggml.scores[{}] is NaN", id);
    bpe["merges"] = sentencepiece_merges(tokens, scores);
    bpe["byte_fallback"] = true;
    bpe["fuse_unk"] = true;
    // llama.cpp's default unknown token is id 0.
    const auto unk = gguf_token_id(metadata, "tokenizer.ggml.unknown_token_id", tokens.size()).value_or(0);
    bpe["unk_token"] = std::string(tokens[static_cast<std::size_t>(unk)]);

    const bool prefix = gguf_flag(metadata, "tokenizer.ggml.add_space_prefix", true);
    const Json spaces = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", metaspace}};
    document["normalizer"] =
        prefix ? Json{{"type", "Sequence"},
                      {"normalizers", Json::array({{{"type", "Prepend"}, {"prepend", metaspace}}, spaces})}}
               : spaces;
    Json decoders = Json::array({{{"type", "Replace"}, {"pattern", {{"String", metaspace}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}},
                                 {{"type", "Fuse"}}});
    if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    document["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
    document["post_processor"] = gguf_post_processor(metadata, tokens, {.add_bos = true, .bos_id = 1, .eos_id = 2});
}

}  // namespace detail

// The tokenizer.json document equivalent to the file's tokenizer metadata.
inline Json gguf_tokenizer_json(const GgufView& file) {
    const GgufMetadata& metadata = file.metadata();
    const std::string& where = metadata.file();
    const std::string_view model = metadata.get_string("tokenizer.ggml.model");
    check(model == "gpt2" || model == "llama", where.c_str(),
          "tokenizer.ggml.model '{}' is not supported (luminal reads 'gpt2', byte-level BPE, and 'llama', "
          "SentencePiece BPE)", model);
    const auto& tokens = metadata.get_array<std::string_view>("tokenizer.ggml.tokens");
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
        if (type == GgufTokenType::Control || type == GgufTokenType::UserDefined || type == GgufTokenType::Unknown)
            added.push_back({{"id", id}, {"content", token}, {"special", type != GgufTokenType::UserDefined},
                             {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    }
    Json bpe = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", Json::array()},
                {"ignore_merges", false}, {"byte_fallback", false}};
    Json document = {{"version", "1.0"}, {"added_tokens", std::move(added)}};
    if (model == "llama") {
        detail::sentencepiece_document(metadata, tokens, document, bpe);
        document["model"] = std::move(bpe);
        return document;
    }
    for (const std::string_view merge : metadata.get_array<std::string_view>("tokenizer.ggml.merges"))
        bpe["merges"].push_back(merge);
    const std::string_view pre = metadata.contains("tokenizer.ggml.pre") ? metadata.get_string("tokenizer.ggml.pre")
                                                                         : std::string_view("default");
    document["pre_tokenizer"] = detail::gguf_pre_tokenizer(pre, where);
    document["post_processor"] = detail::gguf_post_processor(metadata, tokens, {});
    document["decoder"] = detail::byte_level(true);
    document["model"] = std::move(bpe);
    if (pre == "qwen2") document["normalizer"] = {{"type", "NFC"}};
    return document;
}

inline Tokenizer gguf_tokenizer(const GgufView& file) {
    return Tokenizer::from_parsed_json(gguf_tokenizer_json(file), file.metadata().file() + ": tokenizer.ggml");
}

}  // namespace luminal::io

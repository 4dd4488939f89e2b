#pragma once
// A Hugging Face tokenizer.json tokenizer: BPE models with byte-level (Llama 3,
// Qwen, GPT-2/SmolLM) or SentencePiece-style byte-fallback (Gemma, Llama 2)
// vocabularies, with the normalizers, pre-tokenizers, post-processors, decoders
// and added tokens those models use. encode/decode give the ids and text the
// `tokenizers` package gives (tests/io/test_tokenizer.cpp checks it on fixtures).
//
// Encoding, as in tokenizers: added tokens are cut out of the raw input first
// (longest match); the rest is normalized, searched again for added tokens whose
// "normalized" flag is set, pre-tokenized into words and each word BPE-encoded;
// with add_special_tokens the post-processor's tokens go around the result.
//
// Bad input is a luminal::Error, never undefined behaviour: a malformed file
// (naming the field and value), text that is not valid UTF-8 (naming the byte
// offset; tokenizers only accepts valid strings), an id outside the vocabulary
// in decode (tokenizers silently drops it).
//
// encode() and decode() are const and may run on several threads at once. A
// bounded per-word cache speeds up encoding; a call that finds it busy in
// another thread encodes without it.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/io/tokenizer_added_tokens.hpp"
#include "luminal/io/tokenizer_bpe.hpp"
#include "luminal/io/tokenizer_decoders.hpp"
#include "luminal/io/tokenizer_normalizers.hpp"
#include "luminal/io/tokenizer_post_processors.hpp"
#include "luminal/io/tokenizer_pre_tokenizers.hpp"
#include "luminal/io/tokenizer_string_map.hpp"
#include "luminal/io/tokenizer_words.hpp"
#include "luminal/io/utf8.hpp"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luminal::io {

class Tokenizer {
public:
    // Parses tokenizer.json text; `where` (a path, or "tokenizer.json") prefixes errors.
    static Tokenizer from_json(std::string_view json_text, const std::string& where) {
        return from_parsed_json(parse_json(json_text, where), where);
    }

    // A tokenizer.json document already parsed (or built, as from GGUF metadata).
    static Tokenizer from_parsed_json(const Json& root, const std::string& where) {
        check(root.is_object(), where.c_str(), "expected a JSON object at the top level, got {}", root.type_name());
        // Truncation and padding change what encode returns; they are not implemented.
        for (const char* field : {"truncation", "padding"}) {
            const auto it = root.find(field);
            check(it == root.end() || it->is_null(), where.c_str(), "field '{}' must be null (not supported), got {}",
                  field, it == root.end() ? "" : it->dump().substr(0, 60));
        }
        Tokenizer tokenizer;
        tokenizer.load_model(json_required<Json>(root, "model", where), where + ": model");
        if (const auto json = json_optional<Json>(root, "normalizer", where))
            tokenizer.normalizer_ = tokenizer::parse_normalizer(*json, where + ": normalizer");
        if (const auto json = json_optional<Json>(root, "pre_tokenizer", where))
            tokenizer.pre_tokenizer_ = tokenizer::parse_pre_tokenizer(*json, where + ": pre_tokenizer");
        if (const auto json = json_optional<Json>(root, "post_processor", where))
            tokenizer.frame_ = tokenizer::parse_post_processor(*json, where + ": post_processor");
        if (const auto json = json_optional<Json>(root, "decoder", where))
            tokenizer.decoder_ = tokenizer::parse_decoder(*json, where + ": decoder");
        tokenizer.load_added_tokens(json_value_or<std::vector<Json>>(root, "added_tokens", {}, where),
                                    where + ": added_tokens");
        tokenizer.build_id_table(where);
        return tokenizer;
    }

    static Tokenizer from_file(const std::filesystem::path& path) { return from_json(read_text_file(path), path.string()); }

    // The ids of `text`; with add_special_tokens, the post-processor's tokens too
    // (e.g. a leading <|begin_of_text|>).
    std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const {
        if (const auto bad = utf8::first_invalid(text))
            throw Error("Tokenizer::encode", fmt::format("input is not valid UTF-8 (byte {} of {})", *bad, text.size()));
        check(text.size() < std::numeric_limits<std::uint32_t>::max() / 4, "Tokenizer::encode",
              "input of {} bytes is too long (limit 1 GiB)", text.size());
        std::unique_lock cache_lock(cache_->mutex, std::try_to_lock);
        Encoding encoding{*this, cache_lock.owns_lock() ? cache_.get() : nullptr, {}};
        encoding.ids.reserve(text.size() / 3 + 4);
        if (add_special_tokens) encoding.ids = frame_.before;
        thread_local std::vector<tokenizer::Segment> segments;
        segments.clear();
        raw_added_.split(text, segments);
        for (const auto& segment : segments) {
            if (segment.token >= 0) encoding.ids.push_back(raw_added_.token(segment.token).id);
            else encoding.add_text(text.substr(segment.begin, segment.end - segment.begin), segment.begin == 0);
        }
        if (add_special_tokens) encoding.ids.insert(encoding.ids.end(), frame_.after.begin(), frame_.after.end());
        return std::move(encoding.ids);
    }

    // The text of `ids` through the decoder; skip_special_tokens leaves out added
    // tokens marked special. An id outside the vocabulary is an Error.
    std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const {
        std::vector<std::string> tokens;
        tokens.reserve(ids.size());
        for (const std::int32_t id : ids) {
            const Kind kind = kind_of(id);
            check(kind != Kind::Absent, "Tokenizer::decode", "id {} is not in the vocabulary (size {})", id, vocab_size());
            if (skip_special_tokens && kind == Kind::Special) continue;
            tokens.push_back(tokens_[static_cast<std::size_t>(id)]);
        }
        std::string text;
        if (decoder_) {
            decoder_->decode(tokens);
            for (const auto& token : tokens) text += token;
            return text;
        }
        for (std::size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
        return text;
    }

    std::optional<std::int32_t> token_to_id(std::string_view token) const {
        if (const auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
        if (const auto it = model_.vocab().find(token); it != model_.vocab().end()) return it->second;
        return std::nullopt;
    }

    std::optional<std::string_view> id_to_token(std::int32_t id) const {
        if (kind_of(id) == Kind::Absent) return std::nullopt;
        return tokens_[static_cast<std::size_t>(id)];
    }

    // One past the highest id of the model vocabulary and the added tokens.
    std::int32_t vocab_size() const { return static_cast<std::int32_t>(tokens_.size()); }

    bool is_special(std::int32_t id) const { return kind_of(id) == Kind::Special; }

    // The first token the post-processor puts before the text, or else a
    // conventionally named one (<|begin_of_text|>, <bos>, <s>).
    std::optional<std::int32_t> bos_id() const {
        if (!frame_.before.empty()) return frame_.before.front();
        return first_known({"<|begin_of_text|>", "<bos>", "<s>"});
    }

    // End of text by its conventional name. Chat models also stop at their
    // end-of-turn token (see chat_template.hpp).
    std::optional<std::int32_t> eos_id() const { return first_known({"<|end_of_text|>", "<|endoftext|>", "<eos>", "</s>"}); }

private:
    enum class Kind : std::uint8_t { Absent, Model, Added, Special };

    struct WordCache {
        static constexpr std::size_t max_words = 10000, max_word_bytes = 256;
        std::mutex mutex;
        tokenizer::StringMap<std::pair<std::uint32_t, std::uint32_t>> words;  // -> (offset, count) in ids
        std::vector<std::int32_t> ids;
    };

    // One encode call's output and cache access.
    struct Encoding {
        const Tokenizer& tokenizer;
        WordCache* cache;
        std::vector<std::int32_t> ids;

        // Text between added tokens: normalize, look for normalized added tokens,
        // then pre-tokenize and encode the rest.
        void add_text(std::string_view raw, bool at_origin) {
            std::string normalized(raw);
            if (tokenizer.normalizer_) tokenizer.normalizer_->normalize(normalized);
            if (tokenizer.normalized_added_.empty()) {
                add_words(std::move(normalized), at_origin);
                return;
            }
            std::vector<tokenizer::Segment> segments;
            tokenizer.normalized_added_.split(normalized, segments);
            for (const auto& segment : segments) {
                if (segment.token >= 0) ids.push_back(tokenizer.normalized_added_.token(segment.token).id);
                else add_words(normalized.substr(segment.begin, segment.end - segment.begin), at_origin && segment.begin == 0);
            }
        }

        void add_words(std::string normalized, bool at_origin) {
            thread_local tokenizer::Words words;
            words.reset(std::move(normalized), at_origin);
            if (tokenizer.pre_tokenizer_) tokenizer.pre_tokenizer_->pre_tokenize(words);
            for (const auto& span : words.spans) add_word(words.word(span), words.bytes_unspelled);
        }

        void add_word(std::string_view word, bool raw_bytes) {
            const bool cacheable = cache != nullptr && word.size() <= WordCache::max_word_bytes;
            if (cacheable) {
                if (const auto it = cache->words.find(word); it != cache->words.end()) {
                    const auto first = cache->ids.begin() + it->second.first;
                    ids.insert(ids.end(), first, first + it->second.second);
                    return;
                }
            }
            const std::size_t start = ids.size();
            tokenizer.model_.encode_word(word, raw_bytes, ids);
            if (!cacheable) return;
            if (cache->words.size() >= WordCache::max_words) {
                cache->words.clear();
                cache->ids.clear();
            }
            const auto offset = static_cast<std::uint32_t>(cache->ids.size());
            cache->ids.insert(cache->ids.end(), ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end());
            cache->words.emplace(word, std::pair{offset, static_cast<std::uint32_t>(ids.size() - start)});
        }
    };

    Tokenizer() = default;

    void load_model(const Json& json, const std::string& where) {
        check(json.is_object(), where.c_str(), "expected an object, got {}", json.type_name());
        // Some older files leave out the type of a BPE model.
        const auto type = json_value_or<std::string>(json, "type", json.contains("merges") ? "BPE" : "", where);
        check(type == "BPE", where.c_str(), "model type '{}' is not supported (only BPE)", type);
        model_ = tokenizer::Bpe::from_json(json, where);
    }

    void load_added_tokens(const std::vector<Json>& items, const std::string& where) {
        for (std::size_t i = 0; i < items.size(); ++i) {
            const std::string token_where = fmt::format("{}[{}]", where, i);
            auto token = tokenizer::AddedToken::from_json(items[i], token_where);
            if (token.content.empty()) continue;  // tokenizers ignores these too
            // A token already in the vocab keeps the vocab's id, as in tokenizers.
            if (const auto it = model_.vocab().find(token.content); it != model_.vocab().end()) token.id = it->second;
            const auto [it, inserted] = added_ids_.emplace(token.content, token.id);
            check(inserted || it->second == token.id, token_where.c_str(), "token '{}' appears twice, with ids {} and {}",
                  token.content, it->second, token.id);
            if (!inserted) continue;
            added_.push_back(token);
            if (!token.normalized) {
                raw_added_.add(token.content, token);
                continue;
            }
            // Matched in normalized text, so matched in its normalized form.
            std::string pattern = token.content;
            if (normalizer_) normalizer_->normalize(pattern);
            normalized_added_.add(pattern, token);
        }
    }

    // id -> token string and kind, checking that no two tokens share an id.
    void build_id_table(const std::string& where) {
        std::int64_t max_id = -1;
        for (const auto& [token, id] : model_.vocab()) max_id = std::max<std::int64_t>(max_id, id);
        for (const auto& token : added_) max_id = std::max<std::int64_t>(max_id, token.id);
        const std::size_t count = model_.vocab().size() + added_.size();
        // Real vocabularies are dense; a huge id in a tiny file would allocate gigabytes.
        check(max_id < static_cast<std::int64_t>(2 * count + 1024), where.c_str(),
              "ids are too sparse: highest id {} for {} tokens", max_id, count);
        tokens_.assign(static_cast<std::size_t>(max_id + 1), {});
        kinds_.assign(static_cast<std::size_t>(max_id + 1), Kind::Absent);
        for (const auto& [token, id] : model_.vocab()) {
            const auto slot = static_cast<std::size_t>(id);
            check(kinds_[slot] == Kind::Absent, where.c_str(), "model.vocab: id {} is given to both '{}' and '{}'", id,
                  tokens_[slot], token);
            tokens_[slot] = token;
            kinds_[slot] = Kind::Model;
        }
        for (const auto& token : added_) {
            const auto slot = static_cast<std::size_t>(token.id);
            check(kinds_[slot] == Kind::Absent || tokens_[slot] == token.content, where.c_str(),
                  "added_tokens: id {} of '{}' is already the vocab's id of '{}'", token.id, token.content, tokens_[slot]);
            tokens_[slot] = token.content;
            kinds_[slot] = token.special ? Kind::Special : Kind::Added;
        }
        for (const auto ids : {&frame_.before, &frame_.after})
            for (const std::int32_t id : *ids)
                check(kind_of(id) != Kind::Absent, where.c_str(), "post_processor: special token id {} is not in the vocabulary", id);
    }

    Kind kind_of(std::int32_t id) const {
        return id >= 0 && static_cast<std::size_t>(id) < kinds_.size() ? kinds_[static_cast<std::size_t>(id)] : Kind::Absent;
    }

    std::optional<std::int32_t> first_known(std::initializer_list<std::string_view> names) const {
        for (const auto name : names)
            if (const auto id = token_to_id(name)) return id;
        return std::nullopt;
    }

    tokenizer::Bpe model_;
    std::unique_ptr<tokenizer::Normalizer> normalizer_;
    std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer_;
    std::unique_ptr<tokenizer::Decoder> decoder_;
    tokenizer::SpecialTokenFrame frame_;
    std::vector<tokenizer::AddedToken> added_;
    tokenizer::AddedTokenMatcher raw_added_, normalized_added_;
    tokenizer::StringMap<std::int32_t> added_ids_;
    std::vector<std::string> tokens_;
    std::vector<Kind> kinds_;
    std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();
};

// Decodes a stream of ids one at a time, as a generation loop produces them.
// Each step returns the text that has become final, never part of a UTF-8
// character: while the decoded text ends in U+FFFD (an incomplete character) it
// returns "" and waits for more ids (at most max_pending). finish() returns what
// is still held. For ids that decode to valid UTF-8, the concatenation of all
// steps and finish() is decode() of all the ids.
//
// Only the ids since the last returned text are decoded again, together with the
// ids that produced that text: decoders such as Strip or Metaspace treat the
// first token specially, so new text is diffed against the same context.
// Invalid byte sequences can change text already returned (a byte-fallback run
// that turns invalid decodes to one U+FFFD per byte); the stream then carries on
// from the new text without repeating it. An id the tokenizer has no token for
// (a model's padded vocabulary) adds no text and is skipped, as the tokenizers
// package's decode skips it. Holds a reference: the Tokenizer must outlive it.
class StreamingDecoder {
public:
    static constexpr std::size_t max_pending = 32;

    explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
        : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

    std::string step(std::int32_t id) {
        if (!tokenizer_->id_to_token(id)) return {};
        ids_.push_back(id);
        std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
        // An incomplete character can make a byte-fallback run invalid as a whole,
        // so the text is compared with the context only once it is complete.
        if (text.ends_with(utf8::replacement_character) && ids_.size() - context_ids_ < max_pending) return {};
        if (!text.starts_with(prefix_)) {
            restart_context(std::move(text));
            return {};
        }
        // An id may add no text (a skipped special token): keep it as pending.
        if (text.size() <= prefix_.size()) return {};
        std::string fresh = text.substr(prefix_.size());
        // The ids that produced `fresh` become the context of the next step.
        ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(context_ids_));
        restart_context(tokenizer_->decode(ids_, skip_special_tokens_));
        return fresh;
    }

    // Text still held back at the end of the stream; the decoder is then empty.
    std::string finish() {
        std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
        std::string rest = text.starts_with(prefix_) ? text.substr(prefix_.size()) : std::string();
        ids_.clear();
        restart_context({});
        return rest;
    }

private:
    void restart_context(std::string decoded) {
        context_ids_ = ids_.size();
        prefix_ = std::move(decoded);
    }

    const Tokenizer* tokenizer_;
    bool skip_special_tokens_;
    std::vector<std::int32_t> ids_;  // context ids, then the ids not yet returned as text
    std::size_t context_ids_ = 0;    // how many of ids_ are context
    std::string prefix_;             // decode() of the context ids
};

}  // namespace luminal::io

#pragma once
// tokenizer.json pre-tokenizers: split normalized text into the words the model
// encodes one at a time. Sequence, Split (String/Regex, the five delimiter
// behaviours, invert), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer_limits.hpp"
#include "luminal/io/tokenizer_pattern.hpp"
#include "luminal/io/tokenizer_words.hpp"
#include "luminal/io/utf8.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace luminal::io::tokenizer {

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    virtual void pre_tokenize(Words& words) const = 0;
};

// What happens to the pieces a pattern matches (tokenizers' SplitDelimiterBehavior).
enum class Delimiter { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

inline Delimiter parse_delimiter(const std::string& name, const std::string& where) {
    if (name == "Removed") return Delimiter::Removed;
    if (name == "Isolated") return Delimiter::Isolated;
    if (name == "MergedWithPrevious") return Delimiter::MergedWithPrevious;
    if (name == "MergedWithNext") return Delimiter::MergedWithNext;
    if (name == "Contiguous") return Delimiter::Contiguous;
    throw Error(where, fmt::format("unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
                                   "MergedWithNext or Contiguous)",
                                   name));
}

namespace detail {

struct Piece {
    std::uint32_t begin, end;
    bool is_match;
};

// Cuts every word of `words` at the matches find(word, on_match) reports, and
// keeps, drops or merges the matched pieces as `delimiter` says.
template <typename Find>
void split_words(Words& words, Delimiter delimiter, bool invert, Find&& find) {
    words.spell_bytes();
    std::vector<Span> out;
    out.reserve(words.spans.size() * 2);
    std::vector<Piece> pieces;
    for (const Span& span : words.spans) {
        pieces.clear();
        std::uint32_t previous = span.begin;
        find(words.word(span), [&](std::size_t begin, std::size_t end) {
            const auto b = static_cast<std::uint32_t>(span.begin + begin), e = static_cast<std::uint32_t>(span.begin + end);
            if (previous < b) pieces.push_back({previous, b, invert});
            pieces.push_back({b, e, !invert});
            previous = e;
        });
        if (previous < span.end) pieces.push_back({previous, span.end, invert});

        bool previous_match = false;
        const std::size_t first = out.size();
        switch (delimiter) {
            case Delimiter::Isolated:
                for (const Piece& p : pieces) out.push_back({p.begin, p.end});
                break;
            case Delimiter::Removed:
                for (const Piece& p : pieces)
                    if (!p.is_match) out.push_back({p.begin, p.end});
                break;
            case Delimiter::MergedWithPrevious:
                for (const Piece& p : pieces) {
                    if (p.is_match && !previous_match && out.size() > first) out.back().end = p.end;
                    else out.push_back({p.begin, p.end});
                    previous_match = p.is_match;
                }
                break;
            case Delimiter::MergedWithNext:
                // Mirror image of MergedWithPrevious: walk backwards, then restore order.
                for (auto p = pieces.rbegin(); p != pieces.rend(); ++p) {
                    if (p->is_match && !previous_match && out.size() > first) out.back().begin = p->begin;
                    else out.push_back({p->begin, p->end});
                    previous_match = p->is_match;
                }
                std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
                break;
            case Delimiter::Contiguous:
                for (std::size_t i = 0; i < pieces.size(); ++i) {
                    if (i > 0 && pieces[i].is_match == previous_match) out.back().end = pieces[i].end;
                    else out.push_back({pieces[i].begin, pieces[i].end});
                    previous_match = pieces[i].is_match;
                }
                break;
        }
    }
    words.spans = std::move(out);
    words.drop_empty();
}

// Reports each character satisfying `predicate` as a match of its own.
template <typename Predicate>
auto each_char_where(Predicate predicate) {
    return [predicate](std::string_view word, auto&& on_match) {
        for (std::size_t pos = 0; pos < word.size();) {
            const std::size_t length = utf8::char_length(word, pos);
            if (predicate(utf8::decode_at(word, pos))) on_match(pos, pos + length);
            pos += length;
        }
    };
}

inline const std::string gpt2_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace detail

class SequencePreTokenizer final : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
    void pre_tokenize(Words& words) const override {
        for (const auto& step : steps_) step->pre_tokenize(words);
    }

private:
    std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Pattern pattern, Delimiter delimiter, bool invert)
        : pattern_(std::move(pattern)), delimiter_(delimiter), invert_(invert) {}
    void pre_tokenize(Words& words) const override {
        detail::split_words(words, delimiter_, invert_,
                            [this](std::string_view word, auto&& on_match) { pattern_.for_each_match(word, on_match); });
    }

private:
    Pattern pattern_;
    Delimiter delimiter_;
    bool invert_;
};

// GPT-2's pre-tokenizer: optional leading space, optional GPT-2 regex split, then
// every byte spelled in the byte-level alphabet.
class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& where)
        : add_prefix_space_(add_prefix_space) {
        if (use_regex) regex_ = std::make_unique<Regex>(detail::gpt2_regex, where);
    }
    void pre_tokenize(Words& words) const override {
        if (add_prefix_space_)
            words.rebuild([](std::string_view word, bool, std::string& out, std::vector<Span>& spans) {
                const auto begin = static_cast<std::uint32_t>(out.size());
                if (word.front() != ' ') out.push_back(' ');
                out.append(word);
                spans.push_back({begin, static_cast<std::uint32_t>(out.size())});
            });
        if (regex_)
            detail::split_words(words, Delimiter::Isolated, false,
                                [this](std::string_view word, auto&& on_match) { regex_->for_each_match(word, on_match); });
        else
            words.spell_bytes();  // an earlier ByteLevel's spelling comes first
        words.bytes_unspelled = true;
    }

private:
    bool add_prefix_space_;
    std::unique_ptr<Regex> regex_;
};

// SentencePiece's whitespace handling: spaces become `replacement` (▁), a marker is
// prepended (always, or only at the start of the input), and words optionally
// split before each marker.
class MetaspacePreTokenizer final : public PreTokenizer {
public:
    enum class Prepend { Always, First, Never };
    MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
        : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
    void pre_tokenize(Words& words) const override {
        words.rebuild([this](std::string_view word, bool first, std::string& out, std::vector<Span>& spans) {
            const std::size_t begin = out.size();
            const bool starts_with_marker = word.starts_with(' ') || word.starts_with(replacement_);
            if (!starts_with_marker && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && first)))
                out.append(replacement_);
            for (const char c : word) {
                if (c == ' ') out.append(replacement_);
                else out.push_back(c);
            }
            if (!split_) {
                spans.push_back({static_cast<std::uint32_t>(begin), static_cast<std::uint32_t>(out.size())});
                return;
            }
            // Each word starts at a marker: the marker merges with what follows it.
            std::size_t start = begin;
            for (std::size_t pos = out.find(replacement_, begin + 1); pos != std::string::npos;
                 pos = out.find(replacement_, pos + replacement_.size())) {
                if (pos > start) spans.push_back({static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(pos)});
                start = pos;
            }
            spans.push_back({static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(out.size())});
        });
    }

private:
    std::string replacement_;
    Prepend prepend_;
    bool split_;
};

class DigitsPreTokenizer final : public PreTokenizer {
public:
    explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
    void pre_tokenize(Words& words) const override {
        detail::split_words(words, individual_ ? Delimiter::Isolated : Delimiter::Contiguous, false,
                            detail::each_char_where(utf8::is_numeric));
    }

private:
    bool individual_;
};

// Splits on whitespace, dropping it.
class WhitespaceSplitPreTokenizer final : public PreTokenizer {
public:
    void pre_tokenize(Words& words) const override {
        detail::split_words(words, Delimiter::Removed, false, detail::each_char_where(utf8::is_whitespace));
    }
};

// Words are runs of \w or runs of other non-space characters; whitespace is dropped.
class WhitespacePreTokenizer final : public PreTokenizer {
public:
    explicit WhitespacePreTokenizer(const std::string& where) : regex_(R"(\w+|[^\w\s]+)", where) {}
    void pre_tokenize(Words& words) const override {
        detail::split_words(words, Delimiter::Removed, true,
                            [this](std::string_view word, auto&& on_match) { regex_.for_each_match(word, on_match); });
    }

private:
    Regex regex_;
};

inline MetaspacePreTokenizer::Prepend parse_prepend_scheme(const Json& json, const std::string& where) {
    using Prepend = MetaspacePreTokenizer::Prepend;
    if (const auto scheme = json_optional<std::string>(json, "prepend_scheme", where)) {
        if (*scheme == "always") return Prepend::Always;
        if (*scheme == "first") return Prepend::First;
        if (*scheme == "never") return Prepend::Never;
        throw Error(where, fmt::format("unknown prepend_scheme '{}' (expected always, first or never)", *scheme));
    }
    // Files from before prepend_scheme existed say add_prefix_space instead.
    return json_value_or<bool>(json, "add_prefix_space", true, where) ? Prepend::Always : Prepend::Never;
}

inline std::string parse_metaspace_replacement(const Json& json, const std::string& where) {
    auto replacement = json_required<std::string>(json, "replacement", where);
    check(!replacement.empty() && utf8::char_length(replacement, 0) == replacement.size(), where.c_str(),
          "field 'replacement' must be one character, got '{}'", replacement);
    return replacement;
}

inline std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& json, const std::string& where, int depth = 0) {
    const auto type = json_required<std::string>(json, "type", where);
    if (type == "Sequence") {
        check(depth < max_nesting, where.c_str(), "Sequence nested more than {} deep", max_nesting);
        const auto items = json_required<std::vector<Json>>(json, "pretokenizers", where);
        std::vector<std::unique_ptr<PreTokenizer>> steps;
        for (std::size_t i = 0; i < items.size(); ++i)
            steps.push_back(parse_pre_tokenizer(items[i], fmt::format("{}.pretokenizers[{}]", where, i), depth + 1));
        return std::make_unique<SequencePreTokenizer>(std::move(steps));
    }
    if (type == "Split")
        return std::make_unique<SplitPreTokenizer>(
            Pattern::from_json(json_required<Json>(json, "pattern", where), where + ".pattern"),
            parse_delimiter(json_required<std::string>(json, "behavior", where), where),
            json_value_or<bool>(json, "invert", false, where));
    if (type == "ByteLevel")
        return std::make_unique<ByteLevelPreTokenizer>(json_value_or<bool>(json, "add_prefix_space", true, where),
                                                       json_value_or<bool>(json, "use_regex", true, where), where);
    if (type == "Metaspace") {
        const bool split = json_value_or<bool>(json, "split", true, where);
        return std::make_unique<MetaspacePreTokenizer>(parse_metaspace_replacement(json, where),
                                                       parse_prepend_scheme(json, where), split);
    }
    if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(json_value_or<bool>(json, "individual_digits", false, where));
    if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
    if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>(where);
    throw Error(where, fmt::format("unknown pre_tokenizer type '{}'", type));
}

}  // namespace luminal::io::tokenizer

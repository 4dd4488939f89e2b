#pragma once
// tokenizer.json decoders: turn the token strings of some ids back into text.
// Each works on the list of token strings (tokenizers' decode_chain); the results
// are concatenated at the end. ByteLevel, ByteFallback, Fuse, Replace, Strip,
// Metaspace, Sequence.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer_byte_level.hpp"
#include "luminal/io/tokenizer_limits.hpp"
#include "luminal/io/tokenizer_pattern.hpp"
#include "luminal/io/tokenizer_pre_tokenizers.hpp"
#include "luminal/io/utf8.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace luminal::io::tokenizer {

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual void decode(std::vector<std::string>& tokens) const = 0;
    // An upper bound on output bytes per input byte, as Normalizer::growth.
    virtual double growth() const { return 3; }  // U+FFFD for a single byte
};

class SequenceDecoder final : public Decoder {
public:
    explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
    void decode(std::vector<std::string>& tokens) const override {
        for (const auto& step : steps_) step->decode(tokens);
    }
    double growth() const override {
        double product = 1;
        for (const auto& step : steps_) product *= step->growth();
        return product;
    }

private:
    std::vector<std::unique_ptr<Decoder>> steps_;
};

// Byte-level alphabet back to bytes, then bytes to text with invalid sequences
// replaced by U+FFFD; the result is one string.
class ByteLevelDecoder final : public Decoder {
public:
    void decode(std::vector<std::string>& tokens) const override {
        std::string bytes;
        for (const auto& token : tokens) ByteLevelAlphabet::get().unspell(token, bytes);
        tokens.assign(1, utf8::lossy(bytes));
    }
};

// Runs of <0xHH> tokens become the bytes they name: their text when the run is
// valid UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
public:
    void decode(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string run;
        std::size_t run_length = 0;
        const auto flush = [&] {
            if (run_length == 0) return;
            if (!utf8::first_invalid(run)) {
                out.push_back(run);
            } else {
                for (std::size_t i = 0; i < run_length; ++i) out.emplace_back(utf8::replacement_character);
            }
            run.clear();
            run_length = 0;
        };
        for (auto& token : tokens) {
            if (const auto byte = byte_token(token)) {
                run.push_back(static_cast<char>(*byte));
                ++run_length;
                continue;
            }
            flush();
            out.push_back(std::move(token));
        }
        flush();
        tokens = std::move(out);
    }

private:
    static std::optional<unsigned char> byte_token(const std::string& token) {
        if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
        const auto digit = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            return -1;
        };
        const int high = digit(token[3]), low = digit(token[4]);
        if (high < 0 || low < 0) return std::nullopt;
        return static_cast<unsigned char>(high * 16 + low);
    }
};

class FuseDecoder final : public Decoder {
public:
    void decode(std::vector<std::string>& tokens) const override {
        std::string joined;
        for (const auto& token : tokens) joined += token;
        tokens.assign(1, std::move(joined));
    }
};

class ReplaceDecoder final : public Decoder {
public:
    ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void decode(std::vector<std::string>& tokens) const override {
        for (auto& token : tokens) token = pattern_.replace_all(token, content_);
    }
    double growth() const override { return pattern_.replacement_growth(content_); }

private:
    Pattern pattern_;
    std::string content_;
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
public:
    StripDecoder(std::string content, std::size_t start, std::size_t stop)
        : content_(std::move(content)), start_(start), stop_(stop) {}
    void decode(std::vector<std::string>& tokens) const override {
        for (auto& token : tokens) {
            std::size_t begin = 0, end = token.size();
            for (std::size_t i = 0; i < start_ && std::string_view(token).substr(begin).starts_with(content_); ++i)
                begin += content_.size();
            for (std::size_t i = 0; i < stop_ && end - begin >= content_.size() &&
                                    std::string_view(token).substr(0, end).ends_with(content_);
                 ++i)
                end -= content_.size();
            token = token.substr(begin, end - begin);
        }
    }

private:
    std::string content_;
    std::size_t start_, stop_;
};

// Metaspace markers back to spaces; the markers of the first token are dropped
// when the pre-tokenizer would have prepended one.
class MetaspaceDecoder final : public Decoder {
public:
    MetaspaceDecoder(std::string replacement, bool drops_first) : replacement_(std::move(replacement)), drops_first_(drops_first) {}
    void decode(std::vector<std::string>& tokens) const override {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            std::string out;
            const std::string& token = tokens[i];
            for (std::size_t pos = 0; pos < token.size();) {
                if (std::string_view(token).substr(pos).starts_with(replacement_)) {
                    if (i != 0 || !drops_first_) out.push_back(' ');
                    pos += replacement_.size();
                } else {
                    out.push_back(token[pos++]);
                }
            }
            tokens[i] = std::move(out);
        }
    }

private:
    std::string replacement_;
    bool drops_first_;
};

namespace detail {

inline std::unique_ptr<Decoder> parse_decoder(const Json& json, const std::string& where, int depth);

inline std::unique_ptr<Decoder> parse_decoder_step(const Json& json, const std::string& where, int depth) {
    const auto type = json_required<std::string>(json, "type", where);
    if (type == "Sequence") {
        check(depth < max_nesting, where.c_str(), "Sequence nested more than {} deep", max_nesting);
        const auto items = json_required<std::vector<Json>>(json, "decoders", where);
        std::vector<std::unique_ptr<Decoder>> steps;
        for (std::size_t i = 0; i < items.size(); ++i)
            steps.push_back(parse_decoder(items[i], fmt::format("{}.decoders[{}]", where, i), depth + 1));
        return std::make_unique<SequenceDecoder>(std::move(steps));
    }
    if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
    if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
    if (type == "Fuse") return std::make_unique<FuseDecoder>();
    if (type == "Replace")
        return std::make_unique<ReplaceDecoder>(
            Pattern::from_json(json_required<Json>(json, "pattern", where), where + ".pattern"),
            json_required<std::string>(json, "content", where));
    if (type == "Strip") {
        auto content = json_required<std::string>(json, "content", where);
        check(!content.empty(), where.c_str(), "field 'content' must not be empty");
        return std::make_unique<StripDecoder>(std::move(content), json_value_or<std::size_t>(json, "start", 0, where),
                                              json_value_or<std::size_t>(json, "stop", 0, where));
    }
    if (type == "Metaspace")
        return std::make_unique<MetaspaceDecoder>(
            parse_metaspace_replacement(json, where),
            parse_prepend_scheme(json, where) != MetaspacePreTokenizer::Prepend::Never);
    throw Error(where, fmt::format("unknown decoder type '{}'", type));
}

inline std::unique_ptr<Decoder> parse_decoder(const Json& json, const std::string& where, int depth) {
    auto decoder = parse_decoder_step(json, where, depth);
    check(decoder->growth() <= max_growth, where.c_str(), "decoders could grow text {:g}-fold (limit {:g})",
          decoder->growth(), max_growth);
    return decoder;
}

}  // namespace detail

inline std::unique_ptr<Decoder> parse_decoder(const Json& json, const std::string& where) {
    return detail::parse_decoder(json, where, 0);
}

}  // namespace luminal::io::tokenizer

#pragma once
// tokenizer.json normalizers: rewrite a stretch of input text before it is split
// into words. Sequence, NFC/NFD/NFKC/NFKD (utf8proc), Lowercase, Prepend, Replace,
// Strip. Unknown types are an error, never skipped.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer_limits.hpp"
#include "luminal/io/tokenizer_pattern.hpp"
#include "luminal/io/utf8.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace luminal::io::tokenizer {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    virtual void normalize(std::string& text) const = 0;
    // An upper bound on output bytes per input byte (a constant added counts as
    // its size): lets the loader reject chains that grow text exponentially.
    virtual double growth() const = 0;
};


class SequenceNormalizer final : public Normalizer {
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
    void normalize(std::string& text) const override {
        for (const auto& step : steps_) step->normalize(text);
    }
    double growth() const override {
        double product = 1;
        for (const auto& step : steps_) product *= step->growth();
        return product;
    }

private:
    std::vector<std::unique_ptr<Normalizer>> steps_;
};

// A Unicode normalization form through utf8proc.
class UnicodeNormalizer final : public Normalizer {
public:
    UnicodeNormalizer(utf8proc_option_t options, bool composes) : options_(options), composes_(composes) {}
    void normalize(std::string& text) const override {
        if (already_normal(text)) return;
        utf8proc_uint8_t* mapped = nullptr;
        const utf8proc_ssize_t length =
            utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                         &mapped, static_cast<utf8proc_option_t>(options_ | UTF8PROC_STABLE));
        if (length < 0) throw Error("tokenizer normalizer", utf8proc_errmsg(length));
        text.assign(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
        std::free(mapped);
    }
    // NFKD can expand one character into 18 (U+FDFA); canonical forms by a few.
    double growth() const override { return options_ & UTF8PROC_COMPAT ? 18 : 4; }

private:
    // Text below U+0300 neither decomposes nor composes under NFC, and ASCII is
    // invariant under every form: most input never reaches utf8proc.
    bool already_normal(const std::string& text) const {
        const unsigned char limit = composes_ && !(options_ & UTF8PROC_COMPAT) ? 0xCC : 0x80;
        for (const char c : text)
            if (static_cast<unsigned char>(c) >= limit) return false;
        return true;
    }

    utf8proc_option_t options_;
    bool composes_;
};

// Simple (one code point to one) Unicode lowercase mapping.
class LowercaseNormalizer final : public Normalizer {
public:
    void normalize(std::string& text) const override {
        std::string out;
        out.reserve(text.size());
        for (std::size_t pos = 0; pos < text.size(); pos += utf8::char_length(text, pos))
            utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(utf8::decode_at(text, pos)))));
        text = std::move(out);
    }
    double growth() const override { return 2; }
};

class PrependNormalizer final : public Normalizer {
public:
    explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
    void normalize(std::string& text) const override {
        if (!text.empty()) text.insert(0, prefix_);
    }
    double growth() const override { return 1.0 + static_cast<double>(prefix_.size()); }

private:
    std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }
    double growth() const override { return pattern_.replacement_growth(content_); }

private:
    Pattern pattern_;
    std::string content_;
};

// Removes leading and/or trailing Unicode whitespace.
class StripNormalizer final : public Normalizer {
public:
    StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
    void normalize(std::string& text) const override {
        std::size_t begin = 0, end = text.size();
        if (left_)
            while (begin < end && utf8::is_whitespace(utf8::decode_at(text, begin))) begin += utf8::char_length(text, begin);
        if (right_)
            while (end > begin) {
                const std::size_t start = utf8::previous_char_start(text, end);
                if (!utf8::is_whitespace(utf8::decode_at(text, start))) break;
                end = start;
            }
        text = text.substr(begin, end - begin);
    }
    double growth() const override { return 1; }

private:
    bool left_, right_;
};

namespace detail {

inline std::unique_ptr<Normalizer> parse_normalizer(const Json& json, const std::string& where, int depth);

inline std::unique_ptr<Normalizer> parse_normalizer_step(const Json& json, const std::string& where, int depth) {
    const auto type = json_required<std::string>(json, "type", where);
    if (type == "Sequence") {
        check(depth < max_nesting, where.c_str(), "Sequence nested more than {} deep", max_nesting);
        const auto items = json_required<std::vector<Json>>(json, "normalizers", where);
        std::vector<std::unique_ptr<Normalizer>> steps;
        for (std::size_t i = 0; i < items.size(); ++i)
            steps.push_back(parse_normalizer(items[i], fmt::format("{}.normalizers[{}]", where, i), depth + 1));
        return std::make_unique<SequenceNormalizer>(std::move(steps));
    }
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_COMPOSE, true);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_DECOMPOSE, false);
    if (type == "NFKC")
        return std::make_unique<UnicodeNormalizer>(static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_COMPAT), true);
    if (type == "NFKD")
        return std::make_unique<UnicodeNormalizer>(static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), false);
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    if (type == "Prepend") return std::make_unique<PrependNormalizer>(json_required<std::string>(json, "prepend", where));
    if (type == "Replace")
        return std::make_unique<ReplaceNormalizer>(
            Pattern::from_json(json_required<Json>(json, "pattern", where), where + ".pattern"),
            json_required<std::string>(json, "content", where));
    if (type == "Strip")
        return std::make_unique<StripNormalizer>(json_value_or<bool>(json, "strip_left", true, where),
                                                 json_value_or<bool>(json, "strip_right", true, where));
    throw Error(where, fmt::format("unknown normalizer type '{}'", type));
}

inline std::unique_ptr<Normalizer> parse_normalizer(const Json& json, const std::string& where, int depth) {
    auto normalizer = parse_normalizer_step(json, where, depth);
    check(normalizer->growth() <= max_growth, where.c_str(), "normalizers could grow text {:g}-fold (limit {:g})",
          normalizer->growth(), max_growth);
    return normalizer;
}

}  // namespace detail

// Builds the normalizer at `json` (an object with "type"); `where` names it in errors.
inline std::unique_ptr<Normalizer> parse_normalizer(const Json& json, const std::string& where) {
    return detail::parse_normalizer(json, where, 0);
}

}  // namespace luminal::io::tokenizer

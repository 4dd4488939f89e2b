#pragma once
// The patterns tokenizer.json components split and replace on: {"String": s} (a
// literal) or {"Regex": r} (Oniguruma syntax in tokenizers; PCRE2 with UTF and
// Unicode properties reads the patterns real models ship identically).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/utf8.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace luminal::io::tokenizer {

// A compiled PCRE2 regex (JIT-compiled where the platform allows). Immutable once
// built, so one Regex serves any number of threads.
class Regex {
public:
    Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
        int error_code = 0;
        PCRE2_SIZE error_offset = 0;
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
        if (code == nullptr)
            throw Error(where, fmt::format("regex '{}' does not compile at offset {}: {}", pattern, error_offset,
                                           message(error_code)));
        code_ = std::shared_ptr<pcre2_code>(code, CodeDeleter{});
        // Without JIT (an unsupported CPU) the interpreter gives the same matches, slower.
        jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    }

    const std::string& pattern() const { return pattern_; }

    // Calls on_match(begin, end) for each non-overlapping match in `subject`, left
    // to right. `subject` must be valid UTF-8 (the tokenizer validates its input).
    template <typename OnMatch>
    void for_each_match(std::string_view subject, OnMatch&& on_match) const {
        pcre2_match_data* data = match_data();
        const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
        std::size_t start = 0;
        while (start <= subject.size()) {
            const int rc = jit_ ? pcre2_jit_match(code_.get(), text, subject.size(), start, 0, data, nullptr)
                                : pcre2_match(code_.get(), text, subject.size(), start, PCRE2_NO_UTF_CHECK, data,
                                              nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) return;
            // rc == 0 only says the one-pair ovector had no room for capture groups.
            if (rc < 0)
                throw Error("tokenizer regex", fmt::format("matching '{}' failed: {}", pattern_, message(rc)));
            const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
            const std::size_t begin = ovector[0], end = ovector[1];
            on_match(begin, end);
            // An empty match would be found again at the same place: step one character.
            start = end > begin ? end : end < subject.size() ? end + utf8::char_length(subject, end) : end + 1;
        }
    }

private:
    struct CodeDeleter {
        void operator()(pcre2_code* code) const { pcre2_code_free(code); }
    };
    struct MatchDataDeleter {
        void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
    };

    // One ovector pair (the whole match) is all the splitter reads; one block per
    // thread keeps matching allocation-free and thread-safe.
    static pcre2_match_data* match_data() {
        thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> data{pcre2_match_data_create(1, nullptr)};
        if (!data) throw Error("tokenizer regex", "out of memory for PCRE2 match data");
        return data.get();
    }

    static std::string message(int code) {
        PCRE2_UCHAR buffer[256];
        const int length = pcre2_get_error_message(code, buffer, sizeof buffer);
        return length < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buffer), length);
    }

    std::string pattern_;
    std::shared_ptr<pcre2_code> code_;
    bool jit_ = false;
};

// {"String": literal} or {"Regex": pattern}.
class Pattern {
public:
    static Pattern from_json(const Json& json, const std::string& where) {
        if (!json.is_object() || json.size() != 1)
            throw Error(where, fmt::format("field 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}",
                                           json.dump().substr(0, 60)));
        Pattern pattern;
        if (json.contains("String")) {
            pattern.literal_ = json_required<std::string>(json, "String", where);
            check(!pattern.literal_.empty(), where.c_str(), "field 'pattern.String' must not be empty");
        } else if (json.contains("Regex")) {
            pattern.regex_ = std::make_shared<const Regex>(json_required<std::string>(json, "Regex", where), where);
        } else {
            throw Error(where, fmt::format("unknown pattern kind '{}' (expected String or Regex)", json.begin().key()));
        }
        return pattern;
    }

    // Calls on_match(begin, end) for each non-overlapping match, left to right.
    template <typename OnMatch>
    void for_each_match(std::string_view subject, OnMatch&& on_match) const {
        if (regex_) {
            regex_->for_each_match(subject, on_match);
            return;
        }
        for (std::size_t pos = subject.find(literal_); pos != std::string_view::npos;
             pos = subject.find(literal_, pos + literal_.size()))
            on_match(pos, pos + literal_.size());
    }

    // Output bytes per input byte of replace_all(…, content), at most: a literal
    // match shrinks to content; a regex may also match empty between characters.
    double replacement_growth(std::string_view content) const {
        const auto size = static_cast<double>(content.size());
        return regex_ ? size + 1 : std::max(1.0, size / static_cast<double>(literal_.size())) + size;
    }

    // `subject` with every match replaced by `content`.
    std::string replace_all(std::string_view subject, std::string_view content) const {
        std::string out;
        out.reserve(subject.size());
        std::size_t copied = 0;
        for_each_match(subject, [&](std::size_t begin, std::size_t end) {
            out.append(subject.substr(copied, begin - copied));
            out.append(content);
            copied = end;
        });
        out.append(subject.substr(copied));
        return out;
    }

private:
    std::string literal_;
    std::shared_ptr<const Regex> regex_;
};

}  // namespace luminal::io::tokenizer

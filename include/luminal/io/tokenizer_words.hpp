#pragma once
// The state pre-tokenizers work on: one buffer of normalized text and the spans
// of it that are words so far. Splitting only rewrites spans; pre-tokenizers
// that change characters (Metaspace, a prefix space) rebuild the buffer.
#include "luminal/io/tokenizer_byte_level.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io::tokenizer {

struct Span {
    std::uint32_t begin, end;
};

struct Words {
    std::string text;
    std::vector<Span> spans;
    // Whether text[0] is the first character of the caller's whole input: the
    // Metaspace prepend_scheme "first" adds its marker only there.
    bool at_origin = true;
    // ByteLevel maps bytes to its alphabet last; when nothing follows it, the model
    // reads raw bytes and spells them itself (its word cache then skips the work).
    bool bytes_unspelled = false;

    void reset(std::string normalized, bool starts_at_origin) {
        text = std::move(normalized);
        spans.clear();
        if (!text.empty()) spans.push_back({0, static_cast<std::uint32_t>(text.size())});
        at_origin = starts_at_origin;
        bytes_unspelled = false;
    }

    std::string_view word(const Span& span) const { return std::string_view(text).substr(span.begin, span.end - span.begin); }

    // Rebuilds the buffer: rewrite(word, is_first_at_origin, out, out_spans) appends
    // the new text of each word to `out` and its words (absolute spans) to `out_spans`.
    template <typename Rewrite>
    void rebuild(Rewrite&& rewrite) {
        spell_bytes();
        std::string out;
        out.reserve(text.size() + text.size() / 4 + 8);
        std::vector<Span> out_spans;
        out_spans.reserve(spans.size());
        for (const Span& span : spans) rewrite(word(span), at_origin && span.begin == 0, out, out_spans);
        text = std::move(out);
        spans = std::move(out_spans);
        drop_empty();
    }

    // Applies a deferred ByteLevel spelling; later pre-tokenizers see vocabulary characters.
    void spell_bytes() {
        if (!bytes_unspelled) return;
        bytes_unspelled = false;
        const auto& alphabet = ByteLevelAlphabet::get();
        std::string out;
        out.reserve(text.size() * 2);
        std::vector<Span> out_spans;
        out_spans.reserve(spans.size());
        for (const Span& span : spans) {
            const auto begin = static_cast<std::uint32_t>(out.size());
            alphabet.spell(word(span), out);
            out_spans.push_back({begin, static_cast<std::uint32_t>(out.size())});
        }
        text = std::move(out);
        spans = std::move(out_spans);
    }

    // Words are never empty, and the first one is at the origin only if it starts the buffer.
    void drop_empty() {
        std::erase_if(spans, [](const Span& span) { return span.begin == span.end; });
        if (!spans.empty() && spans.front().begin != 0) at_origin = false;
    }
};

}  // namespace luminal::io::tokenizer

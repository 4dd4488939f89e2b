#pragma once
// UTF-8 helpers for the tokenizer: validation, code point iteration, the lossy
// conversion tokenizers' decoders apply to byte sequences, and the few Unicode
// character classes (whitespace, word characters) its rules are written in.
#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace luminal::io::utf8 {

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence starting at text[pos], or 0 when the bytes
// there are not one (Unicode Table 3-7: no overlongs, surrogates or > U+10FFFF).
inline std::size_t sequence_length(std::string_view text, std::size_t pos) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const std::size_t left = text.size() - pos;
    const unsigned char b0 = byte(pos);
    if (b0 < 0x80) return 1;
    const auto continuation = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
        return byte(pos + i) >= lo && byte(pos + i) <= hi;
    };
    if (b0 >= 0xC2 && b0 <= 0xDF) return left >= 2 && continuation(1) ? 2 : 0;
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (left < 3) return 0;
        const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        return continuation(1, lo, hi) && continuation(2) ? 3 : 0;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (left < 4) return 0;
        const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        return continuation(1, lo, hi) && continuation(2) && continuation(3) ? 4 : 0;
    }
    return 0;
}

// Byte offset of the first ill-formed sequence, or nullopt when `text` is valid UTF-8.
inline std::optional<std::size_t> first_invalid(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        // ASCII runs dominate real text: skip them eight bytes at a time.
        while (pos + 8 <= text.size()) {
            std::uint64_t word;
            __builtin_memcpy(&word, text.data() + pos, 8);
            if (word & 0x8080808080808080ull) break;
            pos += 8;
        }
        if (pos >= text.size()) break;
        const std::size_t length = sequence_length(text, pos);
        if (length == 0) return pos;
        pos += length;
    }
    return std::nullopt;
}

// Length of the character starting at text[pos] in text already known to be valid.
inline std::size_t char_length(std::string_view text, std::size_t pos) {
    const auto b0 = static_cast<unsigned char>(text[pos]);
    return b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
}

// The code point starting at text[pos] in valid UTF-8.
inline char32_t decode_at(std::string_view text, std::size_t pos) {
    const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[pos + i])); };
    switch (char_length(text, pos)) {
        case 1: return byte(0);
        case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
        case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
        default:
            return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    }
}

// The code point ending just before text[end] in valid UTF-8 (end > 0).
inline std::size_t previous_char_start(std::string_view text, std::size_t end) {
    std::size_t pos = end - 1;
    while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
    return pos;
}

inline void append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// Length of the longest prefix of text[pos..] that could still begin a well-formed
// sequence (the "maximal subpart" of Unicode §3.9); at least 1.
inline std::size_t maximal_subpart(std::string_view text, std::size_t pos) {
    const auto b0 = static_cast<unsigned char>(text[pos]);
    std::size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 1;
    }
    std::size_t length = 1;
    while (length < need && pos + length < text.size()) {
        const auto b = static_cast<unsigned char>(text[pos + length]);
        if (b < lo || b > hi) break;
        lo = 0x80;
        hi = 0xBF;
        ++length;
    }
    return length;
}

// Bytes -> text, each maximal ill-formed subpart replaced by one U+FFFD: the
// conversion tokenizers' byte-level decoder applies (Rust's from_utf8_lossy).
inline std::string lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const std::size_t length = sequence_length(bytes, pos);
        if (length > 0) {
            out.append(bytes.substr(pos, length));
            pos += length;
        } else {
            out.append(replacement_character);
            pos += maximal_subpart(bytes, pos);
        }
    }
    return out;
}

// Unicode White_Space (Rust's char::is_whitespace): what added tokens' lstrip/rstrip eat.
inline bool is_whitespace(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// Unicode numeric (Rust's char::is_numeric: Nd, Nl, No): what the Digits pre-tokenizer splits.
inline bool is_numeric(char32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

// A regex \w character (letters, marks, decimal digits, connector punctuation, joiners):
// the test of an added token's single_word flag.
inline bool is_word_character(char32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    if (cp == 0x200C || cp == 0x200D) return true;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_PC: return true;
        default: return false;
    }
}

}  // namespace luminal::io::utf8

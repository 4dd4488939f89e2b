#pragma once
// GPT-2's byte-to-character table: byte-level BPE vocabularies spell every byte
// as one printable character (printable Latin-1 bytes as themselves, the rest as
// U+0100 onwards), so any byte string is a string of vocabulary characters.
#include "luminal/io/utf8.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace luminal::io::tokenizer {

class ByteLevelAlphabet {
public:
    static const ByteLevelAlphabet& get() {
        static const ByteLevelAlphabet alphabet;
        return alphabet;
    }

    // The vocabulary spelling of `byte` (one character, 1 or 2 UTF-8 bytes).
    std::string_view spelling(unsigned char byte) const { return {spellings_[byte].data(), lengths_[byte]}; }
    char32_t code_point(unsigned char byte) const { return code_points_[byte]; }

    // The byte a vocabulary character stands for, or -1 when it stands for none.
    int byte_of(char32_t cp) const { return cp < bytes_.size() ? bytes_[cp] : -1; }

    // `bytes` spelled in the alphabet, appended to `out`.
    void spell(std::string_view bytes, std::string& out) const {
        for (const char c : bytes) out.append(spelling(static_cast<unsigned char>(c)));
    }

    // Undoes spell() on one token. A token holding a character outside the alphabet
    // (an added token such as "hello world") contributes its own UTF-8 bytes.
    void unspell(std::string_view token, std::string& out) const {
        const std::size_t mark = out.size();
        for (std::size_t pos = 0; pos < token.size(); pos += utf8::char_length(token, pos)) {
            const int byte = byte_of(utf8::decode_at(token, pos));
            if (byte < 0) {
                out.resize(mark);
                out.append(token);
                return;
            }
            out.push_back(static_cast<char>(byte));
        }
    }

private:
    ByteLevelAlphabet() {
        bytes_.fill(-1);
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
            code_points_[b] = cp;
            bytes_[cp] = b;
            std::string encoded;
            utf8::append(encoded, cp);
            lengths_[b] = static_cast<std::uint8_t>(encoded.size());
            for (std::size_t i = 0; i < encoded.size(); ++i) spellings_[b][i] = encoded[i];
        }
    }

    std::array<std::array<char, 2>, 256> spellings_{};
    std::array<std::uint8_t, 256> lengths_{};
    std::array<char32_t, 256> code_points_{};
    std::array<int, 324> bytes_{};  // the alphabet's highest character is U+0143
};

}  // namespace luminal::io::tokenizer

#pragma once
// Added tokens (tokenizer.json "added_tokens"): strings such as <|eot_id|> that
// are cut out of the input before the model sees it, each becoming its id. At a
// position where several start, the longest wins; lstrip/rstrip swallow the
// whitespace beside a match and single_word rejects matches inside a word.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/utf8.hpp"

#include <absl/container/flat_hash_map.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io::tokenizer {

struct AddedToken {
    std::string content;
    std::int32_t id = 0;
    bool special = false;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;

    static AddedToken from_json(const Json& json, const std::string& where) {
        AddedToken token;
        token.id = json_required<std::int32_t>(json, "id", where);
        check(token.id >= 0, where.c_str(), "field 'id' must not be negative, got {}", token.id);
        token.content = json_required<std::string>(json, "content", where);
        token.special = json_value_or<bool>(json, "special", false, where);
        token.single_word = json_value_or<bool>(json, "single_word", false, where);
        token.lstrip = json_value_or<bool>(json, "lstrip", false, where);
        token.rstrip = json_value_or<bool>(json, "rstrip", false, where);
        token.normalized = json_value_or<bool>(json, "normalized", !token.special, where);
        return token;
    }
};

// A stretch of text: either an added token (token >= 0, an index into the
// matcher's token list) or text for the normalizer and model (token == -1).
struct Segment {
    std::size_t begin, end;
    std::int32_t token;
};

// Leftmost-longest search for a set of strings: a byte trie, entered only at
// bytes that start some string.
class AddedTokenMatcher {
public:
    // `pattern` is what is searched for; `token` the AddedToken it stands for.
    void add(std::string_view pattern, const AddedToken& token) {
        if (pattern.empty()) return;
        std::uint32_t node = 0;
        for (const char c : pattern) {
            const std::uint64_t key = edge_key(node, c);
            auto it = edges_.find(key);
            if (it == edges_.end()) {
                it = edges_.emplace(key, static_cast<std::uint32_t>(terminal_.size())).first;
                terminal_.push_back(-1);
            }
            node = it->second;
        }
        terminal_[node] = static_cast<std::int32_t>(tokens_.size());
        tokens_.push_back(token);
        starts_[static_cast<unsigned char>(pattern.front())] = true;
    }

    bool empty() const { return tokens_.empty(); }
    const AddedToken& token(std::int32_t index) const { return tokens_[static_cast<std::size_t>(index)]; }

    // Appends the segments of `text` to `out`: matches (with their flags applied)
    // and the text between them.
    void split(std::string_view text, std::vector<Segment>& out) const {
        std::size_t emitted = 0;  // text before this is already in `out`
        std::size_t pos = 0;
        while (const auto match = find(text, pos)) {
            auto [start, stop, index] = *match;
            pos = stop;  // a rejected match is skipped whole, as tokenizers' match iterator does
            const AddedToken& added = tokens_[static_cast<std::size_t>(index)];
            if (added.single_word && (word_char_before(text, start) || word_char_after(text, stop))) continue;
            if (added.lstrip) start = std::max(whitespace_start_before(text, start), emitted);
            if (added.rstrip) stop = whitespace_end_after(text, stop);
            if (emitted < start) out.push_back({emitted, start, -1});
            out.push_back({start, stop, index});
            emitted = stop;
            pos = stop;  // past the whitespace rstrip took
        }
        if (emitted < text.size()) out.push_back({emitted, text.size(), -1});
    }

private:
    struct Match {
        std::size_t begin, end;
        std::int32_t index;
    };

    static std::uint64_t edge_key(std::uint32_t node, char c) {
        return (static_cast<std::uint64_t>(node) << 8) | static_cast<unsigned char>(c);
    }

    std::optional<Match> find(std::string_view text, std::size_t from) const {
        for (std::size_t pos = from; pos < text.size(); ++pos) {
            if (!starts_[static_cast<unsigned char>(text[pos])]) continue;
            std::uint32_t node = 0;
            std::optional<Match> longest;
            for (std::size_t i = pos; i < text.size(); ++i) {
                const auto it = edges_.find(edge_key(node, text[i]));
                if (it == edges_.end()) break;
                node = it->second;
                if (terminal_[node] >= 0) longest = Match{pos, i + 1, terminal_[node]};
            }
            if (longest) return longest;
        }
        return std::nullopt;
    }

    static bool word_char_before(std::string_view text, std::size_t pos) {
        return pos > 0 && utf8::is_word_character(utf8::decode_at(text, utf8::previous_char_start(text, pos)));
    }
    static bool word_char_after(std::string_view text, std::size_t pos) {
        return pos < text.size() && utf8::is_word_character(utf8::decode_at(text, pos));
    }
    static std::size_t whitespace_start_before(std::string_view text, std::size_t pos) {
        while (pos > 0) {
            const std::size_t start = utf8::previous_char_start(text, pos);
            if (!utf8::is_whitespace(utf8::decode_at(text, start))) break;
            pos = start;
        }
        return pos;
    }
    static std::size_t whitespace_end_after(std::string_view text, std::size_t pos) {
        while (pos < text.size() && utf8::is_whitespace(utf8::decode_at(text, pos))) pos += utf8::char_length(text, pos);
        return pos;
    }

    absl::flat_hash_map<std::uint64_t, std::uint32_t> edges_;  // (node, byte) -> node
    std::vector<std::int32_t> terminal_{-1};                    // node -> token index, or -1; node 0 is the root
    std::vector<AddedToken> tokens_;
    std::array<bool, 256> starts_{};
};

}  // namespace luminal::io::tokenizer

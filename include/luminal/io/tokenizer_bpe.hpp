#pragma once
// The BPE model of tokenizer.json: a vocabulary, ranked merges, and the options
// real models use (byte_fallback, unk_token/fuse_unk, ignore_merges, subword
// prefix/suffix). A word becomes ids by starting from its characters and merging
// the lowest-ranked adjacent pair, leftmost first, until no pair has a merge.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer_byte_level.hpp"
#include "luminal/io/tokenizer_string_map.hpp"
#include "luminal/io/utf8.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io::tokenizer {

using Vocab = StringMap<std::int32_t>;

class Bpe {
public:
    // Builds the model at `json` ("type": "BPE"); `where` names it in errors.
    static Bpe from_json(const Json& json, const std::string& where) {
        Bpe bpe;
        const auto& vocab = json_required<Json>(json, "vocab", where);
        check(vocab.is_object(), where.c_str(), "field 'vocab' must be an object, got {}", vocab.type_name());
        bpe.vocab_.reserve(vocab.size());
        for (const auto& [token, id_json] : vocab.items()) {
            const auto id = detail::convert_field<std::int32_t>(id_json, "vocab." + token, where);
            check(id >= 0, where.c_str(), "vocab: token '{}' has negative id {}", token, id);
            bpe.vocab_.emplace(token, id);
        }

        const auto unk = json_optional<std::string>(json, "unk_token", where);
        if (unk) {
            const auto it = bpe.vocab_.find(*unk);
            check(it != bpe.vocab_.end(), where.c_str(), "unk_token '{}' is not in the vocab", *unk);
            bpe.unk_id_ = it->second;
        }
        bpe.fuse_unk_ = json_value_or<bool>(json, "fuse_unk", false, where);
        bpe.byte_fallback_ = json_value_or<bool>(json, "byte_fallback", false, where);
        bpe.ignore_merges_ = json_value_or<bool>(json, "ignore_merges", false, where);
        bpe.prefix_ = json_value_or<std::string>(json, "continuing_subword_prefix", "", where);
        bpe.suffix_ = json_value_or<std::string>(json, "end_of_word_suffix", "", where);
        // Dropout makes encoding random; an inference tokenizer must be deterministic.
        const double dropout = json_value_or<double>(json, "dropout", 0.0, where);
        check(dropout == 0.0, where.c_str(), "dropout {} is not supported (only null or 0)", dropout);

        bpe.parse_merges(json_required<Json>(json, "merges", where), where);
        bpe.index_bytes();
        return bpe;
    }

    const Vocab& vocab() const { return vocab_; }

    // Appends the ids of `word` to `out`. With `raw_bytes` the word is the bytes a
    // ByteLevel pre-tokenizer has not spelled yet (see Words::bytes_unspelled).
    void encode_word(std::string_view word, bool raw_bytes, std::vector<std::int32_t>& out) const {
        if (word.empty()) return;
        thread_local std::string spelled;
        if (raw_bytes) {
            spelled.clear();
            if (ignore_merges_ || !byte_ids_complete_) {
                ByteLevelAlphabet::get().spell(word, spelled);
                if (ignore_merges_ && emit_whole(spelled, out)) return;
            }
            // Every byte has its symbol already: no need to look characters up.
            if (byte_ids_complete_) {
                symbols_from_bytes(word);
                merge_and_emit(out);
                return;
            }
            word = spelled;
        } else if (ignore_merges_ && emit_whole(word, out)) {
            return;
        }
        symbols_from_chars(word);
        merge_and_emit(out);
    }

private:
    struct Merge {
        std::uint32_t rank;
        std::int32_t merged;
    };
    struct Symbol {
        std::int32_t id, prev, next;
    };
    struct Candidate {
        std::uint32_t rank;
        std::int32_t pos, merged;
        // A max-heap on this order pops the lowest rank, then the leftmost position.
        bool operator<(const Candidate& other) const {
            return rank != other.rank ? rank > other.rank : pos > other.pos;
        }
    };

    static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
    }

    std::int32_t id_of(std::string_view token, std::string_view merge_text, const std::string& where) const {
        const auto it = vocab_.find(token);
        if (it == vocab_.end())
            throw Error(where, fmt::format("merge '{}' names '{}', which is not in the vocab", merge_text, token));
        return it->second;
    }

    // Merges come as "left right" strings (older files) or ["left", "right"] pairs.
    void parse_merges(const Json& merges, const std::string& where) {
        check(merges.is_array(), where.c_str(), "field 'merges' must be an array, got {}", merges.type_name());
        merges_.reserve(merges.size());
        std::string merged;
        for (std::size_t rank = 0; rank < merges.size(); ++rank) {
            const Json& merge = merges[rank];
            std::string left, right;
            if (merge.is_string()) {
                const auto& text = merge.get_ref<const std::string&>();
                const std::size_t space = text.find(' ');
                check(space != std::string::npos && space > 0 && space + 1 < text.size() &&
                          text.find(' ', space + 1) == std::string::npos,
                      where.c_str(), "merges[{}] must be two tokens separated by one space, got '{}'", rank, text);
                left = text.substr(0, space);
                right = text.substr(space + 1);
            } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
                left = merge[0].get<std::string>();
                right = merge[1].get<std::string>();
            } else {
                throw Error(where, fmt::format("merges[{}] must be \"a b\" or [\"a\", \"b\"], got {}", rank,
                                               merge.dump().substr(0, 60)));
            }
            const std::string shown = left + " " + right;
            const std::int32_t left_id = id_of(left, shown, where), right_id = id_of(right, shown, where);
            // The merged token drops the right part's continuing-subword prefix.
            merged = left;
            merged.append(right.starts_with(prefix_) ? std::string_view(right).substr(prefix_.size()) : right);
            const std::int32_t merged_id = id_of(merged, shown, where);
            // A repeated pair keeps its last rank, as tokenizers' map insertion does.
            merges_.insert_or_assign(pair_key(left_id, right_id), Merge{static_cast<std::uint32_t>(rank), merged_id});
        }
    }

    // The id of each byte's alphabet character, for words that arrive as raw bytes.
    void index_bytes() {
        if (!prefix_.empty() || !suffix_.empty()) return;  // every symbol then needs its own lookup
        byte_ids_complete_ = true;
        const auto& alphabet = ByteLevelAlphabet::get();
        for (int b = 0; b < 256; ++b) {
            const auto it = vocab_.find(alphabet.spelling(static_cast<unsigned char>(b)));
            byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
            if (it == vocab_.end()) byte_ids_complete_ = false;
        }
    }

    void push_symbol(std::int32_t id) const {
        const auto n = static_cast<std::int32_t>(symbols_.size());
        symbols_.push_back({id, n - 1, n + 1});
    }

    // With ignore_merges a word that is itself in the vocab is that one token.
    bool emit_whole(std::string_view word, std::vector<std::int32_t>& out) const {
        const auto it = vocab_.find(word);
        if (it == vocab_.end()) return false;
        out.push_back(it->second);
        return true;
    }

    // One symbol per raw byte: its alphabet character's id.
    void symbols_from_bytes(std::string_view word) const {
        symbols_.clear();
        for (const char c : word) push_symbol(byte_ids_[static_cast<unsigned char>(c)]);
    }

    // One symbol per character; characters missing from the vocab become their
    // <0xHH> byte tokens (byte_fallback), else the unk token (fused when asked),
    // else nothing, as in tokenizers.
    void symbols_from_chars(std::string_view word) const {
        symbols_.clear();
        thread_local std::string piece;
        std::optional<std::int32_t> pending_unk;
        for (std::size_t pos = 0; pos < word.size();) {
            const std::size_t length = utf8::char_length(word, pos);
            std::string_view text = word.substr(pos, length);
            const bool first = pos == 0, last = pos + length == word.size();
            pos += length;
            if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
                piece.assign(first ? std::string_view() : std::string_view(prefix_));
                piece.append(text);
                if (last) piece.append(suffix_);
                text = piece;
            }
            if (const auto it = vocab_.find(text); it != vocab_.end()) {
                if (pending_unk) push_symbol(*std::exchange(pending_unk, std::nullopt));
                push_symbol(it->second);
                continue;
            }
            if (byte_fallback_ && push_byte_tokens(text)) continue;
            if (!unk_id_) continue;
            if (pending_unk && !fuse_unk_) push_symbol(*pending_unk);
            pending_unk = *unk_id_;
        }
        if (pending_unk) push_symbol(*pending_unk);
    }

    // The <0xHH> tokens of `text`'s bytes, if the vocab has all of them.
    bool push_byte_tokens(std::string_view text) const {
        std::array<std::int32_t, 64> ids{};
        if (text.size() > ids.size()) return false;
        static constexpr char hex[] = "0123456789ABCDEF";
        std::string name = "<0x00>";
        for (std::size_t i = 0; i < text.size(); ++i) {
            const auto b = static_cast<unsigned char>(text[i]);
            name[3] = hex[b >> 4];
            name[4] = hex[b & 15];
            const auto it = vocab_.find(name);
            if (it == vocab_.end()) return false;
            ids[i] = it->second;
        }
        for (std::size_t i = 0; i < text.size(); ++i) push_symbol(ids[i]);
        return true;
    }

    std::optional<Merge> find_merge(std::int32_t left, std::int32_t right) const {
        const auto it = merges_.find(pair_key(left, right));
        if (it == merges_.end()) return std::nullopt;
        return it->second;
    }

    // Repeatedly merges the best pair. Queue entries go stale when a neighbour
    // merges first; one is acted on only if its pair still merges into the same token.
    void merge_and_emit(std::vector<std::int32_t>& out) const {
        // Local references: each thread_local access would otherwise go through a TLS wrapper.
        std::vector<Symbol>& symbols = symbols_;
        std::vector<Candidate>& queue = queue_;
        const auto n = static_cast<std::int32_t>(symbols.size());
        if (n > 1) {
            queue.clear();
            for (std::int32_t i = 0; i + 1 < n; ++i)
                if (const auto merge = find_merge(symbols[i].id, symbols[i + 1].id))
                    queue.push_back({merge->rank, i, merge->merged});
            std::make_heap(queue.begin(), queue.end());
            const auto push = [&](std::int32_t left, std::int32_t right, std::int32_t pos) {
                if (const auto merge = find_merge(left, right)) {
                    queue.push_back({merge->rank, pos, merge->merged});
                    std::push_heap(queue.begin(), queue.end());
                }
            };
            while (!queue.empty()) {
                std::pop_heap(queue.begin(), queue.end());
                const Candidate top = queue.back();
                queue.pop_back();
                Symbol& left = symbols[top.pos];
                if (left.id < 0 || left.next >= n) continue;  // merged away, or now last
                Symbol& right = symbols[left.next];
                const auto current = find_merge(left.id, right.id);
                if (!current || current->merged != top.merged) continue;
                left.id = top.merged;
                right.id = -1;
                left.next = right.next;
                if (left.next < n) symbols[left.next].prev = top.pos;
                if (left.prev >= 0) push(symbols[left.prev].id, left.id, left.prev);
                if (left.next < n) push(left.id, symbols[left.next].id, top.pos);
            }
        }
        for (std::int32_t i = 0; i < n; i = symbols[i].next) out.push_back(symbols[i].id);
    }

    Vocab vocab_;
    absl::flat_hash_map<std::uint64_t, Merge> merges_;
    std::optional<std::int32_t> unk_id_;
    bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
    std::string prefix_, suffix_;
    std::array<std::int32_t, 256> byte_ids_{};
    bool byte_ids_complete_ = false;

    // Scratch space of the merge loop, one per thread.
    static inline thread_local std::vector<Symbol> symbols_;
    static inline thread_local std::vector<Candidate> queue_;
};

}  // namespace luminal::io::tokenizer

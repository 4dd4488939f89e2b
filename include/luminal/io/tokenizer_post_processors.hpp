#pragma once
// tokenizer.json post-processors: what encode(text, add_special_tokens=true) adds
// around the model's ids (e.g. <|begin_of_text|> in front). Single sequences only:
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (changes only
// offsets, so no ids), Sequence.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/tokenizer_limits.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace luminal::io::tokenizer {

// The ids a post-processor puts before and after the encoded text.
struct SpecialTokenFrame {
    std::vector<std::int32_t> before, after;

    // A later post-processor of a Sequence adds its tokens around the earlier ones'.
    void wrap_in(const SpecialTokenFrame& outer) {
        before.insert(before.begin(), outer.before.begin(), outer.before.end());
        after.insert(after.end(), outer.after.begin(), outer.after.end());
    }
};

namespace detail {

inline SpecialTokenFrame parse_template(const Json& json, const std::string& where) {
    const auto pieces = json_required<std::vector<Json>>(json, "single", where);
    const auto& specials = json_required<Json>(json, "special_tokens", where);
    check(specials.is_object(), where.c_str(), "field 'special_tokens' must be an object, got {}", specials.type_name());
    SpecialTokenFrame frame;
    bool seen_sequence = false;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const std::string piece_where = fmt::format("{}.single[{}]", where, i);
        const Json& piece = pieces[i];
        if (piece.is_object() && piece.contains("Sequence")) {
            const auto id = json_required<std::string>(json_required<Json>(piece, "Sequence", piece_where), "id", piece_where);
            check(id == "A", piece_where.c_str(), "a single-sequence template can only hold sequence 'A', got '{}'", id);
            check(!seen_sequence, piece_where.c_str(), "sequence 'A' appears twice");
            seen_sequence = true;
        } else if (piece.is_object() && piece.contains("SpecialToken")) {
            const auto name = json_required<std::string>(json_required<Json>(piece, "SpecialToken", piece_where), "id", piece_where);
            const auto entry = specials.find(name);
            check(entry != specials.end(), piece_where.c_str(), "special token '{}' is not in 'special_tokens'", name);
            const auto ids = json_required<std::vector<std::int32_t>>(*entry, "ids", fmt::format("{}.special_tokens.{}", where, name));
            auto& side = seen_sequence ? frame.after : frame.before;
            side.insert(side.end(), ids.begin(), ids.end());
        } else {
            throw Error(piece_where, fmt::format("expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}, got {}",
                                                 piece.dump().substr(0, 60)));
        }
    }
    check(seen_sequence, where.c_str(), "field 'single' has no sequence 'A'");
    return frame;
}

// BertProcessing and RobertaProcessing: "cls": [token, id] before, "sep": [token, id] after.
inline SpecialTokenFrame parse_cls_sep(const Json& json, const std::string& where) {
    const auto id_of = [&](const char* field) {
        const auto& pair = json_required<Json>(json, field, where);
        check(pair.is_array() && pair.size() == 2, where.c_str(), "field '{}' must be [token, id], got {}", field,
              pair.dump().substr(0, 60));
        return io::detail::convert_field<std::int32_t>(pair[1], std::string(field) + "[1]", where);
    };
    return SpecialTokenFrame{{id_of("cls")}, {id_of("sep")}};
}

}  // namespace detail

inline SpecialTokenFrame parse_post_processor(const Json& json, const std::string& where, int depth = 0) {
    const auto type = json_required<std::string>(json, "type", where);
    if (type == "TemplateProcessing") return detail::parse_template(json, where);
    if (type == "BertProcessing" || type == "RobertaProcessing") return detail::parse_cls_sep(json, where);
    if (type == "ByteLevel") return {};
    if (type == "Sequence") {
        check(depth < max_nesting, where.c_str(), "Sequence nested more than {} deep", max_nesting);
        const auto items = json_required<std::vector<Json>>(json, "processors", where);
        SpecialTokenFrame frame;
        for (std::size_t i = 0; i < items.size(); ++i)
            frame.wrap_in(parse_post_processor(items[i], fmt::format("{}.processors[{}]", where, i), depth + 1));
        return frame;
    }
    throw Error(where, fmt::format("unknown post_processor type '{}'", type));
}

}  // namespace luminal::io::tokenizer

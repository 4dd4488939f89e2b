#pragma once
// A causal mask as nn::attention_mask records it, read back from the mask's
// index expression: query i (at position offset + i) does not see key j when
// j > offset + i, nor, with a window w, when j <= offset + i - w. Only the
// flash kernel's pricing uses it (how many key tiles a block multiplies): the
// kernel itself finds the masked tiles in the bias it reads, whatever the bias.
#include <optional>
#include <utility>

#include "luminal/shape/expression.hpp"

namespace luminal::cuda {

struct CausalMask {
    Expression offset;                   // position of the first query
    std::optional<std::int64_t> window;  // latest positions a query sees

    bool operator==(const CausalMask&) const = default;
    std::size_t hash() const { return offset.hash() * 31 + static_cast<std::size_t>(window.value_or(-1)); }
};

// Mask expression m over an [s, t] index space (element z = i * t + j, true
// where the key is hidden) as a CausalMask, when it is exactly one.
inline std::optional<CausalMask> causal_mask_of(Expression m, Expression t) {
    const Expression z = Expression::index(), key = z % t, query = z / t;
    // gt(key, offset + query) is lt(offset + query, key): the offset is what the left side adds to the query.
    auto future = [&](Expression c) -> std::optional<Expression> {
        if (c.op() != ExprOp::Lt || !(c.rhs() == key)) return std::nullopt;
        const Expression offset = c.lhs() - query;
        if (offset.uses_index() || !(gt(key, offset + query) == c)) return std::nullopt;
        return offset;
    };
    if (auto offset = future(m)) return CausalMask{*offset, std::nullopt};
    if (m.op() != ExprOp::Or) return std::nullopt;
    for (const auto& [hides_future, hides_past] : {std::pair{m.lhs(), m.rhs()}, std::pair{m.rhs(), m.lhs()}}) {
        const auto offset = future(hides_future);
        if (!offset || hides_past.op() != ExprOp::Lt || !(hides_past.lhs() == key)) continue;
        // gt(offset + query - w + 1, key): the right side is the query's position less w - 1.
        const auto shift = (hides_past.rhs() - (*offset + query)).as_constant();
        if (!shift || 1 - *shift < 1) continue;
        const std::int64_t window = 1 - *shift;
        if (logical_or(gt(key, *offset + query), gt(*offset + query - window + 1, key)) == m) return CausalMask{*offset, window};
    }
    return std::nullopt;
}

// Key tiles of `tile` keys a block of query rows [first, last] (last >= first) multiplies under `mask` among t keys.
inline std::int64_t causal_live_tiles(const CausalMask& mask, std::int64_t offset, std::int64_t first, std::int64_t last,
                                      std::int64_t t, std::int64_t tile) {
    const std::int64_t end = std::min(t, offset + last + 1);
    const std::int64_t begin = mask.window ? std::max<std::int64_t>(0, offset + first - *mask.window + 1) : 0;
    if (end <= begin) return 0;
    return (end - 1) / tile - begin / tile + 1;
}

}  // namespace luminal::cuda

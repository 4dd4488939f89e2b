#pragma once
// Whether a position expression gives distinct elements distinct positions:
// the proof a scatter needs to write each element once, with no table of
// claims (a KV cache row written at `position * row + z`, or at a head-major
// `h * rows * row + z % row` of a [heads, rows, row] cache).
//
// The proof reads `at` as a sum of terms c * digit(z), where each digit is
// z itself, z % m, z / d or z / d % m (constant d, m > 0), plus terms free of
// z. It holds when the digits are those of one mixed radix (d = 1 first, each
// next d the product of the previous d and m, the last one reaching `count`
// or, where the count is unbounded, having no m),
// so distinct z have distinct digits, and when, in the order of |c|, each
// coefficient exceeds the widest span the smaller terms reach, so distinct
// digits give distinct sums. A sum it cannot read is not proven.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "luminal/shape/expression.hpp"

namespace luminal {

namespace distinct_detail {

struct Digit {
    std::int64_t coefficient = 1, divisor = 1;
    std::optional<std::int64_t> modulus;  // none: z / divisor, unbounded but for the count
};

// The digit `e` reads of the element index (z, z % m, z / d, z / d % m), if it is one.
inline std::optional<Digit> digit_of(const Expression& e) {
    if (e.op() == ExprOp::Index) return Digit{};
    const bool mod = e.op() == ExprOp::Mod, div = e.op() == ExprOp::Div;
    if (!mod && !div) return std::nullopt;
    const auto by = e.rhs().as_constant();
    if (!by || *by <= 0) return std::nullopt;
    auto inner = digit_of(e.lhs());
    if (!inner || inner->modulus || inner->coefficient != 1) return std::nullopt;
    if (mod) inner->modulus = *by;
    else inner->divisor *= *by;
    return inner;
}

// Appends the digits of the sum `e`; false when a term uses z in another way.
inline bool collect(const Expression& e, std::int64_t scale, std::vector<Digit>& digits) {
    if (!e.uses_index()) return true;
    if (e.op() == ExprOp::Add) return collect(e.lhs(), scale, digits) && collect(e.rhs(), scale, digits);
    if (e.op() == ExprOp::Mul) {
        const auto l = e.lhs().as_constant(), r = e.rhs().as_constant();
        if (r) return collect(e.lhs(), scale * *r, digits);
        if (l) return collect(e.rhs(), scale * *l, digits);
        return false;
    }
    auto d = digit_of(e);
    if (!d || scale == 0) return false;
    d->coefficient = scale;
    digits.push_back(*d);
    return true;
}

}  // namespace distinct_detail

// Whether at(z) differs for every two z in [0, count).
inline bool distinct_positions(const Expression& at, const Expression& count) {
    using namespace distinct_detail;
    const std::int64_t n = count.upper_bound();  // kPosInf where the count is unbounded
    if (n <= 1) return true;
    std::vector<Digit> digits;
    if (!collect(at, 1, digits)) return false;
    // A digit of z / d with d >= count is 0 for every element.
    std::erase_if(digits, [&](const Digit& d) { return d.divisor >= n; });
    if (digits.empty()) return false;
    std::sort(digits.begin(), digits.end(), [](const Digit& a, const Digit& b) { return a.divisor < b.divisor; });
    // One mixed radix: each digit starts where the previous one's modulus ends.
    std::int64_t next = 1;
    std::vector<std::int64_t> reach;  // each digit's largest value below n
    for (const Digit& d : digits) {
        if (d.divisor != next) return false;
        const std::int64_t largest = (n - 1) / d.divisor;
        reach.push_back(d.modulus ? std::min(*d.modulus - 1, largest) : largest);
        if (!d.modulus) {
            next = n;
            continue;
        }
        next = static_cast<std::int64_t>(std::min<__int128>(static_cast<__int128>(d.divisor) * *d.modulus, n));
    }
    if (next < n) return false;
    // Each coefficient beyond the span of the smaller terms (|c| reach, summed).
    std::vector<std::size_t> order(digits.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return std::llabs(digits[a].coefficient) < std::llabs(digits[b].coefficient); });
    __int128 span = 0;
    for (std::size_t i : order) {
        const std::int64_t c = std::llabs(digits[i].coefficient);
        if (c <= span) return false;
        span += static_cast<__int128>(c) * reach[i];
    }
    return true;
}

}  // namespace luminal

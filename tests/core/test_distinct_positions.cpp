// distinct_positions: hand-derived cases (a KV cache row in both layouts, an
// interleave, a wrap, a repeat), and against counting the positions of every
// element for random sums of digits, where a proof must never be wrong.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>
#include <luminal/shape/distinct_positions.hpp>
#include <random>
#include <set>

using luminal::distinct_positions;
using luminal::DynMap;
using luminal::Expression;

namespace {
const Expression element_index = Expression::index();
}

TEST_CASE("positions of a cache write are distinct; a wrap, a repeat or a product of digits is not proven") {
    const Expression p = Expression::dim('p', 0, 4096);
    CHECK(distinct_positions(element_index + p * 1024, 1024));  // a row at p of [rows, 1024]
    CHECK(distinct_positions(element_index / 128 * 262144 + element_index % 128 + p * 128, 1024));  // [8 heads, 2048 rows, 128] at row p
    CHECK(distinct_positions((element_index % 128) * 2 + element_index / 128, 256));  // an interleave
    CHECK(distinct_positions(element_index / 4 % 8 * 4 + element_index % 4 + element_index / 32 * 1000, 200));  // three digits, the last unbounded
    // a digit of a leading size-1 axis, 0 for every element
    CHECK(distinct_positions(element_index / 16 * 256 + element_index / 8 % 2 * 128 + element_index % 8 + p * 8, 16));
    CHECK(distinct_positions(p * 7, 1));  // one element_index
    CHECK(distinct_positions(-element_index + 5, 10));  // reversed
    CHECK_FALSE(distinct_positions(element_index % 128, 256));  // wraps
    CHECK_FALSE(distinct_positions(element_index / 2, 4));  // each position twice
    CHECK_FALSE(distinct_positions(element_index % 128 + element_index / 128 * 64, 256));  // rows overlap
    CHECK_FALSE(distinct_positions(element_index / 128 * (element_index % 128), 256));  // a product of digits
    CHECK_FALSE(distinct_positions(p, 2));  // the same position
    CHECK(distinct_positions(element_index + p * 1024, Expression('s') * 1024));  // a prompt's rows
    CHECK_FALSE(distinct_positions(element_index % 1024, Expression('s')));  // wraps past 1024 rows
}

TEST_CASE("distinct_positions never proves a sum of digits that repeats a position") {
    std::mt19937_64 rng(7);
    int proven = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const std::int64_t count = std::uniform_int_distribution<std::int64_t>(1, 96)(rng);
        Expression at = std::uniform_int_distribution<std::int64_t>(-3, 3)(rng);
        const int terms = std::uniform_int_distribution<int>(1, 3)(rng);
        for (int t = 0; t < terms; ++t) {
            const std::int64_t d = std::array<std::int64_t, 5>{1, 2, 3, 4, 8}[rng() % 5], m = 1 + static_cast<std::int64_t>(rng() % 12);
            const std::int64_t c = std::uniform_int_distribution<std::int64_t>(-40, 40)(rng);
            Expression digit = element_index / d;
            if (rng() % 2) digit = digit % m;
            at = at + digit * c;
        }
        std::set<std::int64_t> seen;
        for (std::int64_t e = 0; e < count; ++e) seen.insert(at.eval(DynMap{}, e));
        const bool distinct = seen.size() == static_cast<std::size_t>(count);
        if (distinct_positions(at, count)) {
            ++proven;
            CHECK_MESSAGE(distinct, at.to_string(), " over ", count);
        }
    }
    CHECK(proven > 100);  // the property is exercised, not vacuous
}

// BlockExpr, the CPU's block evaluation of index expressions, against floor
// division written out here from C++'s truncating operators: constant
// divisors (the reciprocal path and its exact fallback for large values),
// negative indices, composite expressions, and division by zero as an Error.
#include <doctest/doctest.h>

#include <cstdint>
#include <luminal/luminal.hpp>
#include <vector>

namespace {

using luminal::Expression;

std::int64_t expected_floor_div(std::int64_t a, std::int64_t d) {
    std::int64_t q = a / d;
    if (a % d != 0 && ((a < 0) != (d < 0))) --q;
    return q;
}
std::int64_t expected_floor_mod(std::int64_t a, std::int64_t d) { return a - expected_floor_div(a, d) * d; }

std::vector<std::int64_t> evaluate_block(const Expression& e, std::int64_t start, std::int64_t len,
                                         const luminal::DynMap& dims = {}) {
    luminal::cpu::BlockExpr block(e, dims);
    std::vector<std::int64_t> out(static_cast<std::size_t>(len)), scratch;
    block.eval(start, len, out.data(), scratch);
    return out;
}

constexpr std::int64_t kTwo50 = std::int64_t{1} << 50;

}  // namespace

TEST_CASE("BlockExpr: floor division and modulo by constants, on both sides of the reciprocal path's range") {
    const Expression z = Expression::index();
    const std::vector<std::int64_t> divisors = {1, 2, 3, 7, 128, 255, 1000003, kTwo50 - 1, kTwo50, kTwo50 + 1,
                                                (std::int64_t{1} << 61) + 3};
    // Block starts: around zero, negative, near the limit where the reciprocal is exact (2^50), and past it.
    const std::vector<std::int64_t> starts = {0, -1000, -128, kTwo50 - 100, -kTwo50 - 100, kTwo50 * 8,
                                              -(std::int64_t{1} << 61), (std::int64_t{1} << 62) - 100};
    constexpr std::int64_t kLen = 256;
    for (std::int64_t d : divisors) {
        for (std::int64_t start : starts) {
            const auto quotients = evaluate_block(z / Expression(d), start, kLen);
            const auto moduli = evaluate_block(z % Expression(d), start, kLen);
            for (std::int64_t j = 0; j < kLen; ++j) {
                const std::int64_t a = start + j;
                INFO("a = " << a << ", d = " << d);
                REQUIRE(quotients[static_cast<std::size_t>(j)] == expected_floor_div(a, d));
                REQUIRE(moduli[static_cast<std::size_t>(j)] == expected_floor_mod(a, d));
            }
        }
    }
}

TEST_CASE("BlockExpr: hand-derived quotients of negative indices and a composite rank predicate") {
    const Expression z = Expression::index();
    CHECK(evaluate_block(z / Expression(2), -3, 4) == std::vector<std::int64_t>{-2, -1, -1, 0});  // -3..0
    CHECK(evaluate_block(z % Expression(3), -4, 5) == std::vector<std::int64_t>{2, 0, 1, 2, 0});  // -4..0
    // The pair predicate of argsort over rows of n = 3: element (i, j) of a 3x3 block is j < i.
    const Expression n = 3;
    CHECK(evaluate_block(lt(z % n, z / n % n), 0, 9) == std::vector<std::int64_t>{0, 0, 0, 1, 0, 0, 1, 1, 0});
}

TEST_CASE("BlockExpr: a divisor bound to zero is an Error, not a trap") {
    const Expression z = Expression::index();
    CHECK_THROWS_AS(evaluate_block(z / Expression('a'), 0, 8, {{'a', 0}}), luminal::Error);
    CHECK_THROWS_AS(evaluate_block(z % Expression('a'), 0, 8, {{'a', 0}}), luminal::Error);
    CHECK(evaluate_block(z / Expression('a'), 6, 3, {{'a', 4}}) == std::vector<std::int64_t>{1, 1, 2});
}

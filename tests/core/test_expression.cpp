// Expression: interning, simplification, floor semantics, evaluation, printing.
// Expected values are derived by hand (Python's // and % for floor semantics).
#include <thread>

#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

using luminal::DynMap;
using luminal::Expression;

namespace {
const Expression s = 's', p = 'p', z = Expression::index();
}

TEST_CASE("equal expressions are the same interned node") {
    CHECK((s + 1) * 2 == 2 * (1 + s));
    CHECK((s + 1).node() == (1 + s).node());
    CHECK((s * p).hash() == (p * s).hash());
    CHECK_FALSE(s + 1 == s + 2);
}

TEST_CASE("a constant is the same node however it is made, in any thread") {
    // Small constants are kept per thread (ExprPool::constant); the kept node must be the pool's.
    for (std::int64_t v : {0, 1, 5, 63, 64, 1000, -1}) {
        CHECK(Expression(v).node() == (Expression(v - 1) + 1).node());
        CHECK(Expression(v).node() == (Expression(2 * v) / 2).node());
    }
    CHECK(Expression().node() == Expression(0).node());
    const auto* main_seven = Expression(7).node();
    decltype(main_seven) other_seven = nullptr;
    std::thread([&] { other_seven = (Expression(3) + 4).node(); }).join();
    CHECK(other_seven == main_seven);
}

TEST_CASE("constant folding and identities") {
    CHECK((Expression(3) + 4).constant_value() == 7);
    CHECK(s + 0 == s);
    CHECK(s * 1 == s);
    CHECK(s * 0 == Expression(0));
    CHECK(s / 1 == s);
    CHECK(s % 1 == Expression(0));
    CHECK(s - s == Expression(0));
    CHECK(s + s == s * 2);
    CHECK((s + 3) * 2 - s * 2 == Expression(6));
    CHECK(min(s, s + 2) == s);
    CHECK(max(s, s + 2) == s + 2);
    CHECK(lt(s, s + 1) == Expression(1));
    CHECK(eq(s, s) == Expression(1));
    CHECK(eq(s, s + 1) == Expression(0));
}

TEST_CASE("floor division and modulo follow Python") {
    CHECK((Expression(-7) / 2).constant_value() == -4);
    CHECK((Expression(-7) % 2).constant_value() == 1);
    CHECK((Expression(7) / -2).constant_value() == -4);
    CHECK((Expression(7) % -2).constant_value() == -1);
    CHECK((Expression(-8) / 4).constant_value() == -2);
    DynMap dims{{'s', 5}};
    CHECK((z - s).eval(dims, 2) == -3);
    CHECK(((z - s) / 2).eval(dims, 2) == -2);
    CHECK(((z - s) % 4).eval(dims, 2) == 1);
}

TEST_CASE("division and modulo algebra") {
    CHECK((s * 4 + 7) / 4 == s + 1);
    CHECK((s * 4 + 7) % 4 == Expression(3));
    CHECK(z / 4 / 3 == z / 12);
    CHECK(z % 12 % 4 == z % 4);
    CHECK(z % 4 / 4 == Expression(0));  // bounds: z % 4 < 4
    CHECK(z % 4 % 4 == z % 4);
    // The digit decomposition of a row-major index recombines.
    CHECK(z / 4 * 4 + z % 4 == z);
    CHECK(z / 12 * 12 + z / 4 % 3 * 4 + z % 4 == z);
    CHECK(z / 4 % 3 * 4 + z % 4 == z % 12);
}

TEST_CASE("evaluation against a dyn map") {
    DynMap dims{{'s', 3}, {'p', 10}};
    CHECK((s * p + z).eval(dims, 4) == 34);
    CHECK(min(s, p).eval(dims) == 3);
    CHECK(max(s, p).eval(dims) == 10);
    CHECK(lt(p, s).eval(dims) == 0);
    CHECK(logical_and(lt(s, p), lt(z, s)).eval(dims, 1) == 1);
    CHECK(logical_or(lt(p, s), lt(z, s)).eval(dims, 7) == 0);
    CHECK(ceil_div(p, s).eval(dims) == 4);
    CHECK_THROWS_AS((s * 'q').eval(dims), luminal::Error);
    CHECK_THROWS_WITH_AS((s / (p - 10)).eval(dims), doctest::Contains("division by zero"), luminal::Error);
}

TEST_CASE("substitution and binding") {
    Expression e = z * s + p;
    CHECK(e.substitute('s', 4) == z * 4 + p);
    CHECK(e.substitute_index(Expression(2)) == s * 2 + p);
    CHECK(e.bind(DynMap{{'s', 2}, {'p', 1}}) == z * 2 + 1);
    CHECK(e.dims() == std::vector<char>{'p', 's'});
    CHECK(e.uses_index());
    CHECK_FALSE((s + p).uses_index());
}

TEST_CASE("printing as C++ source") {
    CHECK(Expression(5).to_string() == "5");
    CHECK((s + 1).to_string() == "s + 1");
    CHECK((s - 1).to_string() == "s - 1");
    CHECK((z / 4).to_string() == "idx / 4");
    CHECK((z % s).to_string() == "idx % s");
    // Operands that may be negative need floor helpers, not C's truncation.
    CHECK(((z - s) / 2).to_string().starts_with("floordiv("));
    CHECK(((z - s) % 2).to_string().starts_with("floormod("));
    // A constant offset is moved out of the division when that is exact.
    CHECK((z - 3) / 2 == (z + 1) / 2 - 2);
    CHECK(min(s, p).to_string().starts_with("min("));
    CHECK(fmt::format("{}", s * 2) == "s * 2");
}

TEST_CASE("bounds") {
    CHECK((z % 8).lower_bound() == 0);
    CHECK((z % 8).upper_bound() == 7);
    CHECK((z % 8 / 2).upper_bound() == 3);
    CHECK(s.lower_bound() == 0);
    CHECK(lt(z % 8, 8) == Expression(1));
}

TEST_CASE("bad dimension names and overflow are errors") {
    CHECK_THROWS_AS(Expression('1'), luminal::Error);
    CHECK_THROWS_AS(Expression(std::int64_t{1} << 62) * 4, luminal::Error);
    CHECK_THROWS_AS(s / 0, luminal::Error);
}

TEST_CASE("a dimension's range is part of its identity and gives its bounds") {
    const Expression a = Expression::dim('a', 1), r = Expression::dim('r', 8, 15);
    CHECK(a == Expression::dim('a', 1));
    CHECK_FALSE(a == Expression('a'));
    CHECK(Expression::dim('s', 0) == s);  // the default range is [0, inf)
    CHECK(a.lower_bound() == 1);
    CHECK_FALSE(a.bounded_above());
    CHECK(r.upper_bound() == 15);
    CHECK((r * 2 + 1).lower_bound() == 17);
    CHECK((r * 2 + 1).upper_bound() == 31);
    CHECK(a.to_string() == "a");
    CHECK((a + r).dims() == std::vector<char>{'a', 'r'});
    // An unbounded dimension times a negative number is bounded above (x[-a:] in torch).
    CHECK((a * -1).upper_bound() == -1);
    CHECK((a * -1).lower_bound() <= luminal::detail::kNegInf);
    CHECK((Expression::dim('b', 0) * -2).upper_bound() == 0);
    CHECK(lt(a * -1, 0) == Expression(1));
}

TEST_CASE("min, max and comparisons fold with a dimension's range") {
    const Expression a = Expression::dim('a', 1), b = Expression::dim('b', 2, 64);
    CHECK(min(a, 1) == Expression(1));
    CHECK(max(a, 1) == a);
    CHECK(min(b, 64) == b);
    CHECK(max(b, 100) == Expression(100));
    CHECK(lt(0, a) == Expression(1));
    CHECK(eq(b, 1) == Expression(0));
    CHECK(lt(b, 65) == Expression(1));
    // Without the range nothing is known: s may be 0.
    CHECK(min(s, 1).op() == luminal::ExprOp::Min);
}

TEST_CASE("floor division and modulo fold when the range gives one quotient") {
    const Expression r = Expression::dim('r', 8, 15), t = Expression::dim('t', 20, 23);
    CHECK(r / 8 == Expression(1));  // 8 // 8 .. 15 // 8 are all 1
    CHECK(r % 8 == r - 8);          // so r % 8 is r - 8
    CHECK(t / 4 == Expression(5));  // 20 // 4 .. 23 // 4
    CHECK(t % 4 == t - 20);
    // -23 // 6 == -20 // 6 == -4 (floor), so -t % 6 == -t + 24: 1 at t = 23, 4 at t = 20.
    CHECK(-t / 6 == Expression(-4));
    CHECK(-t % 6 == 24 - t);
    CHECK((r + 1) / 16 != Expression(0));  // 9 // 16 == 0 but 16 // 16 == 1: not one quotient
}

TEST_CASE("HF mask sizes prove equal to their dimension once it is at least 1") {
    // The padding-mask code of transformers' decoders builds this size for a prompt of length a.
    auto mask_size = [](Expression a) {
        Expression m = min(min(a, 1), a);
        return (a + m) + min(a + m, 1) * -1;
    };
    const Expression a = Expression::dim('a', 1);
    CHECK(mask_size(a) == a);
    CHECK(mask_size(Expression::dim('a', 2, 4096)) == Expression::dim('a', 2, 4096));
    // Over [0, inf) it is still equal to a (0 at a = 0) but the simplifier cannot see it.
    const Expression unbounded = 'a';
    CHECK_FALSE(mask_size(unbounded) == unbounded);
    for (std::int64_t v : {0, 1, 2, 7}) CHECK(mask_size(unbounded).eval(DynMap{{'a', v}}) == v);
}

TEST_CASE("a dimension's range must be a non-empty part of [0, 2^62)") {
    CHECK_THROWS_AS(Expression::dim('a', -1), luminal::Error);
    CHECK_THROWS_AS(Expression::dim('a', 5, 4), luminal::Error);
    CHECK_THROWS_AS(Expression::dim('1', 1), luminal::Error);
}

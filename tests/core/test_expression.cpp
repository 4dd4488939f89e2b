// Expression: interning, simplification, floor semantics, evaluation, printing.
// Expected values are derived by hand (Python's // and % for floor semantics).
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

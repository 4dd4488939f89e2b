// Shape guards: what a graph assumes about its dims without a proof is checked at
// every execution, and a violation is an Error naming the sizes, not a wrong result.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include <string>

using luminal::DynMap;
using luminal::Expression;
using luminal::Graph;
using luminal::ReferenceRuntime;

namespace {
std::string error_of(ReferenceRuntime& rt, const DynMap& dims) {
    try {
        rt.execute(dims);
    } catch (const luminal::Error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("sizes that cannot be proven equal are guarded at run time") {
    Graph g;
    luminal::GraphTensor x = g.tensor({2, 'a'}), y = g.tensor({2, 'b'});
    luminal::GraphTensor z = (x - y).output();
    REQUIRE(g.guards().equalities().size() == 1);
    ReferenceRuntime rt = g.compile(ReferenceRuntime{});
    rt.set_data(x, std::vector<float>{1, 2, 3, 4, 5, 6});
    rt.set_data(y, std::vector<float>{1, 1, 1, 2, 2, 2});
    rt.execute(DynMap{{'a', 3}, {'b', 3}});
    CHECK(rt.get<float>(z) == std::vector<float>{0, 1, 2, 2, 3, 4});
    const std::string error = error_of(rt, DynMap{{'a', 3}, {'b', 4}});
    CHECK(error.find("sub assumed the sizes a and b equal, but here they are 3 and 4") != std::string::npos);
}

TEST_CASE("provably different sizes are refused when the graph is built") {
    Graph g;
    const Expression a = Expression::dim('a', 1, 8);
    luminal::GraphTensor x = g.tensor({a}), y = g.tensor({a + 8});  // a + 8 >= 9 > a
    CHECK_THROWS_WITH_AS(luminal::GraphTensor(x + y), doctest::Contains("do not broadcast"), luminal::Error);
}

TEST_CASE("a dimension outside its declared range is an Error at execution") {
    Graph g;
    const Expression a = Expression::dim('a', 2, 16);
    luminal::GraphTensor x = g.tensor({a});
    luminal::GraphTensor y = (x * 2.0f).output();
    ReferenceRuntime rt = g.compile(ReferenceRuntime{});
    rt.set_data(x, std::vector<float>{1, 2});
    rt.execute(DynMap{{'a', 2}});
    CHECK(rt.get<float>(y) == std::vector<float>{2, 4});
    rt.set_data(x, std::vector<float>{1});
    CHECK(error_of(rt, DynMap{{'a', 1}}).find("dimension 'a' is 1, outside the range [2, 16]") != std::string::npos);
}

TEST_CASE("one dimension with two ranges in one graph is an Error") {
    Graph g;
    g.tensor({Expression::dim('a', 1)});
    CHECK_THROWS_WITH_AS(g.tensor({Expression::dim('a', 2)}), doctest::Contains("two ranges"), luminal::Error);
}

TEST_CASE("a reshape whose element counts are equal only at run time is guarded, not a crash") {
    // [3, 2] as [(a - 1) / 2 + 1, 2]: 3 rows when a is 5 or 6, 4 when a is 7; no view of the
    // axes groups the two shapes, so the data is read row-major under a guard on the counts.
    Graph g;
    const Expression a = Expression::dim('a', 5, 7);
    luminal::GraphTensor x = g.tensor({3, 2});
    luminal::GraphTensor y = x.permute({1, 0}).reshape({(a - 1) / 2 + 1, 2}).output();
    REQUIRE(g.guards().equalities().size() == 1);
    ReferenceRuntime rt = g.compile(ReferenceRuntime{});
    rt.set_data(x, std::vector<float>{1, 2, 3, 4, 5, 6});
    rt.execute(DynMap{{'a', 6}});
    CHECK(rt.get<float>(y) == std::vector<float>{1, 3, 5, 2, 4, 6});
    CHECK(error_of(rt, DynMap{{'a', 7}}).find("reshape assumed the sizes") != std::string::npos);
}

TEST_CASE("a matmul whose inner sizes are equal only at run time is guarded, not refused") {
    Graph g;
    luminal::GraphTensor x = g.tensor({2, 'a'}), w = g.tensor({3, 2});
    luminal::GraphTensor y = x.matmul(w).output();
    REQUIRE(g.guards().equalities().size() == 1);
    ReferenceRuntime rt = g.compile(ReferenceRuntime{});
    rt.set_data(x, std::vector<float>{1, 2, 3, 4, 5, 6});
    rt.set_data(w, std::vector<float>{1, 0, 0, 1, 1, 1});
    rt.execute(DynMap{{'a', 3}});
    CHECK(rt.get<float>(y) == std::vector<float>{4, 5, 10, 11});  // [[1 2 3] [4 5 6]] @ [[1 0] [0 1] [1 1]]
    CHECK(error_of(rt, DynMap{{'a', 4}}).find("matmul assumed the sizes") != std::string::npos);
}

// User errors surface as luminal::Error naming the shapes, nodes and names involved.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

using namespace luminal;

TEST_CASE("mismatched shapes in a binary op") {
    Graph g;
    auto a = g.tensor({2, 3}), b = g.tensor({4});
    CHECK_THROWS_WITH_AS(GraphTensor(a + b), doctest::Contains("[2, 3] and [4]"), Error);
    CHECK_THROWS_WITH_AS(GraphTensor(a * g.tensor({2, 2})), doctest::Contains("do not broadcast"), Error);
}

TEST_CASE("mismatched matmul") {
    Graph g;
    auto a = g.tensor({2, 3}), b = g.tensor({4, 5});
    CHECK_THROWS_WITH_AS(a.matmul(b), doctest::Contains("[2, 3] @ [4, 5]"), Error);
    CHECK_THROWS_WITH_AS(g.tensor({2, 2, 3}).matmul(g.tensor({3, 3, 1})), doctest::Contains("do not broadcast"), Error);
}

TEST_CASE("set_data with the wrong length") {
    Graph g;
    auto a = g.named_tensor("weights", {2, 2});
    auto s = g.named_tensor("tokens", {'s'});
    (a.sum(0) + 1.0).output();
    (s * 2.0).output();
    auto rt = g.compile(ReferenceRuntime{});
    CHECK_THROWS_WITH_AS(rt.set_data(a, {1, 2, 3}), doctest::Contains("'weights' has shape [2, 2] (4 elements) but 3"), Error);
    // A dynamic shape is checked when the size is known, at execute.
    rt.set_data(a, {1, 2, 3, 4});
    rt.set_data(s, {1, 2, 3});
    g.set_dim('s', 2);
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains("'tokens'"), Error);
}

TEST_CASE("reading a tensor that is not an output") {
    Graph g;
    auto a = g.tensor({2});
    GraphTensor hidden = a * 2.0;
    (a + 1.0).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(a, {1, 2});
    rt.execute(g.dyn_map());
    CHECK_THROWS_WITH_AS(rt.get_f32(hidden), doctest::Contains("is not an output"), Error);
}

TEST_CASE("executing with an unset dynamic dim") {
    Graph g;
    auto a = g.tensor({'s', 2});
    a.sum(1).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(a, {1, 2});
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains("dynamic dimension 's' is not set"), Error);
}

TEST_CASE("mixing tensors of two graphs") {
    Graph g1, g2;
    auto a = g1.tensor({2}), b = g2.tensor({2});
    CHECK_THROWS_WITH_AS(GraphTensor(a + b), doctest::Contains("two different graphs"), Error);
    CHECK_THROWS_WITH_AS(a.matmul(b), doctest::Contains("two different graphs"), Error);
}

TEST_CASE("other misuse") {
    Graph g;
    auto a = g.tensor({2, 3});
    CHECK_THROWS_WITH_AS(a.sum(2), doctest::Contains("axis 2 out of range"), Error);
    CHECK_THROWS_AS(a.reshape({4}), Error);
    CHECK_THROWS_AS(a.squeeze(0), Error);
    CHECK_THROWS_WITH_AS(a.gather(a), doctest::Contains("integer dtype"), Error);
    CHECK_THROWS_AS(GraphTensor(-g.tensor({2}, DType::Bool)), Error);
    CHECK_THROWS_AS(g.iota(Expression::index(), {3}, DType::F32), Error);
    auto idx = g.named_tensor("idx", {2}, DType::I32);
    g.named_tensor("data", {3}).gather(idx).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(idx, std::vector<std::int32_t>{0, 1});
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains("has no data"), Error);
    CHECK_THROWS_WITH_AS(rt.set_data(GraphTensor(idx * 2), std::vector<std::int32_t>{0, 1}),
                         doctest::Contains("is not an input"), Error);
}

TEST_CASE("out-of-range gather index at execution") {
    Graph g;
    auto data = g.tensor({3});
    auto idx = g.tensor({2}, DType::I32);
    data.gather(idx).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(data, {1, 2, 3});
    rt.set_data(idx, std::vector<std::int32_t>{0, 3});
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains("index 3 at position 1 is out of range"), Error);
}

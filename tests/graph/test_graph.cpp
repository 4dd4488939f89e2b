// Graph structure, dynamic dimensions, outputs, dot export, and the runtime's
// persistence rules. Expected values are hand-derived.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

using namespace luminal;

TEST_CASE_TEMPLATE("quickstart outer product", Runtime, ReferenceRuntime, CpuRuntime) {
    Graph cx;
    auto a = cx.tensor({3, 1});
    auto b = cx.tensor({1, 4});
    auto c = a.matmul(b).output();
    auto rt = cx.compile(Runtime{});
    rt.set_data(a, {1, 2, 3});
    rt.set_data(b, {1, 2, 3, 3});
    rt.execute(cx.dyn_map());
    CHECK(rt.get_f32(c) == std::vector<float>{1, 2, 3, 3, 2, 4, 6, 6, 3, 6, 9, 9});
}

TEST_CASE("nodes are recorded in topological order") {
    Graph g;
    auto x = g.named_tensor("x", {2});
    auto y = (x * 2.0 + x).sin().output();
    for (NodeId id = 0; id < g.size(); ++id)
        for (auto& in : g.node(id).inputs) CHECK(in.source < id);
    CHECK(g.outputs() == std::vector<NodeId>{y.id()});
    CHECK(g.node(x.id()).op.label == "x");
}

TEST_CASE("to_dot names every node and edge") {
    Graph g;
    auto x = g.named_tensor("weights", {2, 3});
    x.permute({1, 0}).sum(1).output();
    std::string dot = g.to_dot();
    CHECK(dot.starts_with("digraph"));
    CHECK(dot.find("Input weights") != std::string::npos);
    CHECK(dot.find("SumReduce axis=1") != std::string::npos);
    CHECK(dot.find("n0 -> n1") != std::string::npos);
    CHECK(dot.find("strides=[1, 3]") != std::string::npos);  // the permuted view on the edge
}

TEST_CASE("one compiled graph runs at several sizes of a dynamic dim") {
    Graph g;
    auto x = g.tensor({'s', 2});
    auto total = x.sum(1).output();
    auto rt = g.compile(ReferenceRuntime{});
    g.set_dim('s', 2);
    rt.set_data(x, {1, 2, 3, 4});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(total) == std::vector<float>{3, 7});
    g.set_dim('s', 3);
    rt.set_data(x, {1, 1, 2, 2, 3, 3});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(total) == std::vector<float>{2, 4, 6});
}

TEST_CASE("inputs persist across executions") {
    Graph g;
    auto w = g.named_tensor("w", {2});
    auto x = g.named_tensor("x", {2});
    auto y = (w * x).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(w, {2, 3});
    rt.set_data(x, {1, 1});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(y) == std::vector<float>{2, 3});
    rt.set_data(x, {5, -1});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(y) == std::vector<float>{10, -3});
}

TEST_CASE("a tensor published with output() can be read through its source handle") {
    Graph g;
    auto x = g.tensor({2});
    GraphTensor doubled = x * 2.0;
    doubled.output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(x, {1, 4});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(doubled) == std::vector<float>{2, 8});
}

TEST_CASE("typed data in and out") {
    Graph g;
    auto i = g.tensor({3}, DType::I32);
    auto b = g.tensor({3}, DType::Bool);
    auto out = (i * 3 + 1).output();
    auto flags = (!b).output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(i, std::vector<std::int32_t>{1, -2, 7});
    rt.set_data(b, std::vector<std::uint8_t>{1, 0, 1});
    rt.execute(g.dyn_map());
    CHECK(rt.get<std::int32_t>(out) == std::vector<std::int32_t>{4, -5, 22});
    CHECK(rt.get<std::int32_t>(flags) == std::vector<std::int32_t>{0, 1, 0});
}

TEST_CASE_TEMPLATE("a cast of a permuted node casts the node in order, then permutes", Runtime, ReferenceRuntime, CpuRuntime) {
    Graph g;
    const std::int64_t rows = 2, cols = 3;
    auto w = g.tensor({rows, cols}, DType::BF16);
    auto widened = w.permute({1, 0}).cast(DType::F32);
    // What matmul-reads-narrow-operand looks for: the Cast reads its input whole and in order.
    const Node& cast = g.node(widened.id());
    CHECK(cast.op.kind == OpKind::Cast);
    CHECK(cast.inputs[0].view.is_contiguous());
    CHECK(cast.shape == Shape{rows, cols});
    auto out = widened.output();
    auto rt = g.compile(Runtime{});
    const std::vector<float> values{1, -2, 3.5f, 0.25f, 8, -0.5f};  // exact in bf16
    rt.set_data(w, values);
    rt.execute(g.dyn_map());
    std::vector<float> transposed;
    for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t r = 0; r < rows; ++r) transposed.push_back(values[static_cast<std::size_t>(r * cols + c)]);
    CHECK(rt.get_f32(out) == transposed);
}

// Expression templates: what nodes each expression emits, and when.
#include <doctest/doctest.h>

#include <memory>
#include <type_traits>

#include <luminal/luminal.hpp>

using namespace luminal;

namespace {

// Kinds of the nodes added after `first`, in creation order.
std::vector<OpKind> kinds_since(const Graph& g, std::size_t first) {
    std::vector<OpKind> out;
    for (std::size_t i = first; i < g.size(); ++i) out.push_back(g.nodes()[i].op.kind);
    return out;
}

}  // namespace

TEST_CASE("elementwise arithmetic builds a typed expression, not nodes") {
    Graph g;
    auto a = g.tensor({4}), b = g.tensor({4}), c = g.tensor({4});
    auto e = (a * b + c).sin();
    static_assert(!std::is_same_v<decltype(e), GraphTensor>);
    static_assert(std::is_same_v<decltype(e), Unary<sin_fn, Binary<add_fn, Binary<mul_fn, GraphTensor, GraphTensor>, GraphTensor>>>);
    CHECK(g.size() == 3);
    GraphTensor t = e;
    CHECK(kinds_since(g, 3) == std::vector{OpKind::Mul, OpKind::Add, OpKind::Sin});
    const Node& sin = g.node(t.id());
    CHECK(sin.inputs.size() == 1);
    CHECK(g.node(sin.inputs[0].source).op.kind == OpKind::Add);
}

TEST_CASE("derived ops emit their documented decompositions") {
    Graph g;
    auto a = g.tensor({4}), b = g.tensor({4});
    std::size_t n = g.size();
    GraphTensor sub = a - b;  // a + b * -1
    CHECK(kinds_since(g, n) == std::vector{OpKind::Constant, OpKind::Mul, OpKind::Add});
    n = g.size();
    GraphTensor div = a / b;  // a * recip(b)
    CHECK(kinds_since(g, n) == std::vector{OpKind::Recip, OpKind::Mul});
    n = g.size();
    GraphTensor ex = a.exp();  // exp2(a * log2(e))
    CHECK(kinds_since(g, n) == std::vector{OpKind::Constant, OpKind::Mul, OpKind::Exp2});
    CHECK(g.nodes()[n].op.value == doctest::Approx(1.4426950408889634));
    n = g.size();
    GraphTensor lg = a.log();  // log2(a) * ln(2)
    CHECK(kinds_since(g, n) == std::vector{OpKind::Log2, OpKind::Constant, OpKind::Mul});
    n = g.size();
    GraphTensor sq = a.sqrt().recip();
    CHECK(kinds_since(g, n) == std::vector{OpKind::Sqrt, OpKind::Recip});
    n = g.size();
    GraphTensor sig = a.sigmoid();  // recip(exp(-a) + 1)
    auto kinds = kinds_since(g, n);
    CHECK(kinds.back() == OpKind::Recip);
    CHECK(std::count(kinds.begin(), kinds.end(), OpKind::Exp2) == 1);
    n = g.size();
    GraphTensor lt = a < b;
    CHECK(kinds_since(g, n) == std::vector{OpKind::LessThan});
    CHECK(lt.dtype() == DType::Bool);
    n = g.size();
    GraphTensor gt = a > b;  // b < a
    CHECK(kinds_since(g, n) == std::vector{OpKind::LessThan});
    CHECK(g.node(gt.id()).inputs[0].source == b.id());
    n = g.size();
    GraphTensor summed = a.sum(0);
    CHECK(kinds_since(g, n) == std::vector{OpKind::SumReduce});
    CHECK(summed.shape().empty());
    n = g.size();
    GraphTensor mm = g.tensor({2, 3}).matmul(g.tensor({3, 5}));
    CHECK(kinds_since(g, n + 2) == std::vector{OpKind::Mul, OpKind::SumReduce});  // expand . mul . sum_reduce
    CHECK(mm.shape() == Shape{2, 5});
    (void)sub, (void)div, (void)ex, (void)lg, (void)sq, (void)sig;
}

TEST_CASE("movement ops change views, not the graph") {
    Graph g;
    auto a = g.tensor({2, 3});
    std::size_t n = g.size();
    GraphTensor moved = a.permute({1, 0}).slice({{0, 2}}).pad({{1, 1}}).unsqueeze(0).expand_dim(0, 4);
    CHECK(g.size() == n);
    CHECK(moved.shape() == Shape{4, 1, 4, 2});
    GraphTensor copied = a.permute({1, 0}).reshape({6});  // needs a copy: one Cast to the same dtype
    CHECK(kinds_since(g, n) == std::vector{OpKind::Cast});
    CHECK(copied.dtype() == DType::F32);
}

TEST_CASE("scalars follow torch promotion") {
    Graph g;
    auto i = g.tensor({3}, DType::I32);
    CHECK(GraphTensor(i + 1).dtype() == DType::I32);
    CHECK(GraphTensor(i * 1.5).dtype() == DType::F32);
    CHECK(GraphTensor(i / 2).dtype() == DType::F32);
    CHECK(GraphTensor(2.0 - g.tensor({3}, DType::F16)).dtype() == DType::F16);
    CHECK(GraphTensor(g.tensor({3}, DType::Bool) + 1).dtype() == DType::I64);
    CHECK(i.sum(0).dtype() == DType::I64);
}

TEST_CASE("an auto expression outlives its operands") {
    Graph g;
    auto expression = [&] {
        auto a = std::make_unique<GraphTensor>(g.tensor({3}));
        auto b = std::make_unique<GraphTensor>(g.tensor({3}));
        auto e = *a * *b + 1.0;  // a and b are destroyed when this lambda returns
        return std::pair{e, std::pair{a->id(), b->id()}};
    };
    auto [e, ids] = expression();
    GraphTensor out = e.output();
    auto rt = g.compile(ReferenceRuntime{});
    rt.set_data(GraphTensor(&g, ids.first, ShapeTracker({3}), DType::F32), {1, 2, 3});
    rt.set_data(GraphTensor(&g, ids.second, ShapeTracker({3}), DType::F32), {4, 5, 6});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(out) == std::vector<float>{5, 11, 19});
}

TEST_CASE("a subexpression is lowered once, however often it is used") {
    Graph g;
    auto a = g.tensor({4}), b = g.tensor({4});
    auto product = a * b;
    auto twice = product + product;  // two copies of one subexpression
    GraphTensor t = twice;
    CHECK(kinds_since(g, 2) == std::vector{OpKind::Mul, OpKind::Add});
    CHECK(g.node(t.id()).inputs[0].source == g.node(t.id()).inputs[1].source);
    const std::size_t before = g.size();
    product.sum(0);
    product.max(0);  // reductions of the same expression read the one Mul
    CHECK(kinds_since(g, before) == std::vector{OpKind::SumReduce, OpKind::MaxReduce});
}

// Cost of the symbolic layer the whole compiler leans on: building and
// simplifying index expressions of views, and evaluating them. The peer for
// evaluation is the same index computed by BoundView's direct axis walk.
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include "ratio_main.hpp"

namespace {

using luminal::Expression;
using luminal::ShapeTracker;

// A view as attention produces them: symbolic sizes, permuted, sliced and padded.
ShapeTracker attention_view() {
    Expression s = 's', p = 'p';
    return ShapeTracker({s, 8, p + s, 64}).permute({1, 0, 3, 2}).slice(3, 0, p + s).pad(3, 0, 1).expand_dim(0, 2);
}

void BM_BuildIndexExpression(benchmark::State& state) {
    for (auto _ : state) {
        ShapeTracker view = attention_view();
        benchmark::DoNotOptimize(view.index_expression().node());
        benchmark::DoNotOptimize(view.valid_expression().node());
    }
}

void BM_SimplifyDigitRecombination(benchmark::State& state) {
    Expression z = Expression::index(), s = 's';
    for (auto _ : state) {
        Expression e = z / (s * 12) * (s * 12) + z / 4 % (s * 3) * 4 + z % 4;
        benchmark::DoNotOptimize(e.node());
    }
}

void BM_EvaluateIndexExpression(benchmark::State& state) {
    luminal::DynMap dims{{'s', 16}, {'p', 48}};
    Expression index = attention_view().index_expression().bind(dims);
    std::int64_t i = 0;
    for (auto _ : state) benchmark::DoNotOptimize(index.eval(dims, i++ & 1023));
}

void BM_BoundViewLocate(benchmark::State& state) {
    luminal::DynMap dims{{'s', 16}, {'p', 48}};
    luminal::BoundView view(attention_view(), dims);
    std::int64_t i = 0;
    for (auto _ : state) benchmark::DoNotOptimize(view.locate(i++ & 1023));
}

BENCHMARK(BM_BuildIndexExpression);
BENCHMARK(BM_SimplifyDigitRecombination);
BENCHMARK(BM_EvaluateIndexExpression);
BENCHMARK(BM_BoundViewLocate);

}  // namespace

int main(int argc, char** argv) {
    return luminal_bench::run_with_ratios(argc, argv, {{"BM_EvaluateIndexExpression", "BM_BoundViewLocate"}});
}

// CpuRuntime against peers measured in the same run:
//  * a 256x256x256 Matmul program (Input, Input, Matmul, Output) against
//    plain Eigen on the same matrices: the runtime's overhead around the GEMM
//    (binding views, the output copy);
//  * a linear layer's product, 128 tokens x 768 -> 2048 (a weight [2048, 768]
//    as stored), on one thread, against Eigen's row-major x * w^T: the GEMM
//    that reads weight rows in place (gemm.hpp);
//  * silu(x) * y over 1M f32 elements as one FusedElementwise node against the
//    same graph run as separate primitives (program_of): what fusion saves;
//  * a mixture-of-experts router, softmax and top 8 of 128 experts for 128
//    tokens (nn::route_top_k, compiled), on one thread, against a softmax and
//    std::partial_sort per row: what the graph's sort costs over a sort.
// Prints median ratios (run with --benchmark_repetitions=N for medians).
#include <Eigen/Dense>
#include <benchmark/benchmark.h>

#include <luminal/luminal.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench_data.hpp"
#include "eigen_peers.hpp"
#include "ratio_main.hpp"

namespace {

using luminal_bench::random_values;

constexpr int kSize = 256;
constexpr int kElements = 1 << 20;

luminal::ProgramNode node(std::uint16_t kind, std::vector<luminal::ShapeTracker> views,
                          std::vector<std::uint32_t> sources, luminal::Shape shape, luminal::NodeId hlir = luminal::kNoHlirNode) {
    luminal::ProgramNode n;
    n.spec.kind = kind;
    n.spec.views = std::move(views);
    n.spec.shape = std::move(shape);
    n.spec.hlir = hlir;
    n.sources = std::move(sources);
    return n;
}

void BM_CpuMatmul(benchmark::State& state) {
    luminal::Graph g;
    auto a = g.tensor({kSize, kSize}), b = g.tensor({kSize, kSize});
    auto out = g.tensor({kSize, kSize}).output();  // the graph node the program's Output stands for
    using luminal::symbol_of;
    luminal::Shape sq{kSize, kSize};
    luminal::ShapeTracker plain(sq);
    luminal::Program p;
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Input), {}, {}, sq, a.id()));
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Input), {}, {}, sq, b.id()));
    // a @ b: the Matmul reads b as [n, k], i.e. b transposed.
    luminal::ProgramNode gemm;
    gemm.spec = luminal::NodeSpec::backend(luminal::MatmulOp{}, {plain, plain.permute({1, 0})}, sq, luminal::DType::F32);
    gemm.sources = {0, 1};
    p.nodes.push_back(std::move(gemm));
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Output), {plain}, {2}, sq, out.id()));
    luminal::CpuRuntime rt(luminal::CpuOptions{1});  // one thread, as the Eigen peer
    rt.load(p);
    rt.set_data(a, random_values(kSize * kSize));
    rt.set_data(b, random_values(kSize * kSize));
    for (auto _ : state) rt.execute({});
    state.SetItemsProcessed(state.iterations() * 2LL * kSize * kSize * kSize);
}

constexpr int kTokens = 128, kIn = 768, kOut = 2048;

void BM_CpuLinear(benchmark::State& state) {
    luminal::Graph g;
    auto x = g.tensor({kTokens, kIn}), w = g.tensor({kOut, kIn});
    auto out = g.tensor({kTokens, kOut}).output();
    using luminal::symbol_of;
    luminal::ShapeTracker xs(luminal::Shape{kTokens, kIn}), ws(luminal::Shape{kOut, kIn}), os(luminal::Shape{kTokens, kOut});
    luminal::Program p;
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Input), {}, {}, luminal::Shape{kTokens, kIn}, x.id()));
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Input), {}, {}, luminal::Shape{kOut, kIn}, w.id()));
    luminal::ProgramNode product;
    product.spec = luminal::NodeSpec::backend(luminal::MatmulOp{}, {xs, ws}, luminal::Shape{kTokens, kOut},
                                              luminal::DType::F32);
    product.sources = {0, 1};
    p.nodes.push_back(std::move(product));
    p.nodes.push_back(node(symbol_of(luminal::OpKind::Output), {os}, {2}, luminal::Shape{kTokens, kOut}, out.id()));
    luminal::CpuRuntime rt(luminal::CpuOptions{1});
    rt.load(p);
    rt.set_data(x, random_values(kTokens * kIn));
    rt.set_data(w, random_values(kOut * kIn));
    for (auto _ : state) rt.execute({});
    state.SetItemsProcessed(state.iterations() * 2LL * kTokens * kIn * kOut);
}

void BM_EigenLinear(benchmark::State& state) {
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const RowMajor x = Eigen::Map<RowMajor>(random_values(kTokens * kIn).data(), kTokens, kIn);
    const RowMajor w = Eigen::Map<RowMajor>(random_values(kOut * kIn).data(), kOut, kIn);
    RowMajor out(kTokens, kOut);
    for (auto _ : state) {
        out.noalias() = x * w.transpose();
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(state.iterations() * 2LL * kTokens * kIn * kOut);
}

void BM_EigenMatmul(benchmark::State& state) {
    luminal_bench::eigen_matmul(state, kSize);
    state.SetItemsProcessed(state.iterations() * 2LL * kSize * kSize * kSize);
}

// silu(x) * y = x * recip(1 + exp2(x * -log2(e))) * y
struct SiluGraph {
    luminal::Graph g;
    luminal::GraphTensor x = g.tensor({kElements}), y = g.tensor({kElements});
    luminal::GraphTensor out = (x.silu() * y).output();
};

void BM_CpuSiluMulFused(benchmark::State& state) {
    SiluGraph s;
    using luminal::FusedStep;
    using luminal::OpKind;
    auto program = std::make_shared<luminal::FusedProgram>();
    auto step = [](OpKind k, std::uint16_t a, std::uint16_t b, double value = 0) {
        return FusedStep{k, a, b, luminal::DType::F32, value, luminal::Expression()};
    };
    // slots: 0 = x, 1 = y, 2 + j = step j
    program->steps = {step(OpKind::Constant, 0, 0, -1.4426950408889634),
                      step(OpKind::Mul, 0, 2),
                      step(OpKind::Exp2, 3, 0),
                      step(OpKind::Constant, 0, 0, 1.0),
                      step(OpKind::Add, 4, 5),
                      step(OpKind::Recip, 6, 0),
                      step(OpKind::Mul, 0, 7),
                      step(OpKind::Mul, 8, 1)};
    luminal::Shape shape{kElements};
    luminal::ShapeTracker plain(shape);
    luminal::Program p;
    using luminal::symbol_of;
    p.nodes.push_back(node(symbol_of(OpKind::Input), {}, {}, shape, s.x.id()));
    p.nodes.push_back(node(symbol_of(OpKind::Input), {}, {}, shape, s.y.id()));
    luminal::ProgramNode fused;
    fused.spec = luminal::NodeSpec::backend(luminal::FusedElementwiseOp{program}, {plain, plain}, shape, luminal::DType::F32);
    fused.sources = {0, 1};
    p.nodes.push_back(std::move(fused));
    p.nodes.push_back(node(symbol_of(OpKind::Output), {plain}, {2}, shape, s.out.id()));
    luminal::CpuRuntime rt;
    rt.load(p);
    rt.set_data(s.x, random_values(kElements));
    rt.set_data(s.y, random_values(kElements));
    for (auto _ : state) rt.execute({});
    state.SetItemsProcessed(state.iterations() * kElements);
}

void BM_CpuSiluMulPrimitives(benchmark::State& state) {
    SiluGraph s;
    luminal::CpuRuntime rt;
    rt.load(luminal::program_of(s.g));
    rt.set_data(s.x, random_values(kElements));
    rt.set_data(s.y, random_values(kElements));
    for (auto _ : state) rt.execute({});
    state.SetItemsProcessed(state.iterations() * kElements);
}

constexpr int kRoutedTokens = 128, kExperts = 128, kTopK = 8;

void BM_CpuRouteTopK(benchmark::State& state) {
    luminal::Graph g;
    auto scores = g.tensor({kRoutedTokens, kExperts});
    luminal::nn::Routing routing = luminal::nn::route_top_k(scores, kTopK, true);
    routing.experts.output();
    routing.weights.output();
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto rt = g.compile(luminal::CpuRuntime(luminal::CpuOptions{1}), options);
    rt.set_data(scores, random_values(kRoutedTokens * kExperts));
    for (auto _ : state) rt.execute(g.dyn_map());
    state.SetItemsProcessed(state.iterations() * kRoutedTokens);
}

void BM_StdRouteTopK(benchmark::State& state) {
    const std::vector<float> scores = random_values(kRoutedTokens * kExperts);
    std::vector<float> probabilities(kExperts), weights(kRoutedTokens * kTopK);
    std::vector<int> order(kExperts), experts(kRoutedTokens * kTopK);
    for (auto _ : state) {
        for (int t = 0; t < kRoutedTokens; ++t) {
            const float* row = scores.data() + t * kExperts;
            const float top = *std::max_element(row, row + kExperts);
            float sum = 0;
            for (int e = 0; e < kExperts; ++e) sum += probabilities[e] = std::exp(row[e] - top);
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + kTopK, order.end(), [&](int a, int b) {
                return probabilities[a] > probabilities[b] || (probabilities[a] == probabilities[b] && a < b);
            });
            float picked = 0;
            for (int k = 0; k < kTopK; ++k) picked += probabilities[order[k]];
            for (int k = 0; k < kTopK; ++k) {
                experts[t * kTopK + k] = order[k];
                weights[t * kTopK + k] = probabilities[order[k]] / picked;
            }
        }
        benchmark::DoNotOptimize(experts.data());
        benchmark::DoNotOptimize(weights.data());
    }
    state.SetItemsProcessed(state.iterations() * kRoutedTokens);
}

BENCHMARK(BM_CpuMatmul)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenMatmul)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuLinear)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenLinear)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuSiluMulFused)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuSiluMulPrimitives)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuRouteTopK)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StdRouteTopK)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
    return luminal_bench::run_with_ratios(
        argc, argv, {{"BM_CpuMatmul", "BM_EigenMatmul"}, {"BM_CpuLinear", "BM_EigenLinear"},
                     {"BM_CpuSiluMulFused", "BM_CpuSiluMulPrimitives"},
                     {"BM_CpuRouteTopK", "BM_StdRouteTopK"}});
}

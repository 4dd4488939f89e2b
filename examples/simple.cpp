// A small model end to end: record a graph once (causal self-attention over a
// dynamic number of tokens 's'), compile it for the CPU (e-graph saturation,
// GEMM and fusion rules, extraction), and run it at two sequence lengths
// without recompiling. Pass --dot to print the HLIR graph as Graphviz.
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include <luminal/luminal.hpp>

using luminal::Expression;
using luminal::GraphTensor;

int main(int argc, char** argv) {
    constexpr int dim = 4;
    luminal::Graph cx;
    GraphTensor x = cx.named_tensor("x", {'s', dim});
    GraphTensor wq = cx.named_tensor("wq", {dim, dim});
    GraphTensor wk = cx.named_tensor("wk", {dim, dim});
    GraphTensor wv = cx.named_tensor("wv", {dim, dim});

    GraphTensor q = x.matmul(wq), k = x.matmul(wk), v = x.matmul(wv);
    GraphTensor scores = q.matmul(k.t()) * (1.0 / std::sqrt(double(dim)));
    // Causal mask: token i attends to tokens j <= i.
    Expression s = 's', z = Expression::index();
    GraphTensor future = cx.iota(luminal::gt(z % s, z / s), {s, s}).cast(luminal::DType::Bool);
    GraphTensor weights = luminal::where(future, -INFINITY, scores).softmax(-1);
    GraphTensor out = weights.matmul(v).output();
    GraphTensor top = out.sum(-1).topk_indexes(2, 0).output();

    if (argc > 1 && std::strcmp(argv[1], "--dot") == 0) {
        std::fputs(cx.to_dot().c_str(), stdout);
        return 0;
    }
    auto [rt, report] = luminal::compile_with_report(cx, luminal::CpuRuntime{});
    std::size_t gemms = 0, fused = 0;
    for (auto& node : report.program.nodes) {
        gemms += node.spec.kind == luminal::op_symbol<luminal::MatmulOp>;
        fused += node.spec.kind == luminal::op_symbol<luminal::FusedElementwiseOp>;
    }
    std::printf("recorded %zu HLIR nodes; saturated to %zu e-classes / %zu e-nodes in %.1f ms\n", cx.size(),
                report.saturation.classes, report.saturation.nodes, report.saturation.seconds * 1e3);
    std::printf("program: %zu nodes (%zu GEMMs, %zu fused elementwise regions)\n", report.program.nodes.size(), gemms,
                fused);
    std::vector<float> w(dim * dim);
    std::iota(w.begin(), w.end(), 0.0f);
    for (float& e : w) e = (e - 7.5f) / 10.0f;
    rt.set_data(wq, w);
    rt.set_data(wk, w);
    rt.set_data(wv, w);

    for (int tokens : {2, 5}) {
        cx.set_dim('s', tokens);
        std::vector<float> input(static_cast<std::size_t>(tokens) * dim);
        for (std::size_t i = 0; i < input.size(); ++i) input[i] = std::sin(static_cast<float>(i));
        rt.set_data(x, input);
        rt.execute(cx.dyn_map());
        std::printf("s = %d\n", tokens);
        auto values = rt.get_f32(out);
        for (int t = 0; t < tokens; ++t) {
            std::printf("  token %d:", t);
            for (int d = 0; d < dim; ++d) std::printf(" %8.4f", values[t * dim + d]);
            std::printf("\n");
        }
        auto best = rt.get<int>(top);
        std::printf("  tokens with the largest output sum: %d %d\n", best[0], best[1]);
    }
}

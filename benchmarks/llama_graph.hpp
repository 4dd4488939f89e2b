#pragma once
// A Llama-3-8B-shaped transformer graph (GQA, RoPE, RMSNorm, SwiGLU, causal
// attention over a symbolic sequence length 's') for front-end and
// e-graph benchmarks. Weights are plain named inputs.
#include <cmath>
#include <string>

#include <luminal/luminal.hpp>

namespace luminal_bench {

using luminal::Expression;
using luminal::GraphTensor;

struct Dims {
    int hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, intermediate = 14336, vocab = 128256;
};

inline GraphTensor rotate_half_rope(GraphTensor x, const Dims& d) {  // x: [s, heads, head_dim]
    Expression s = 's', z = Expression::index();
    int half = d.head_dim / 2;
    GraphTensor position = x.graph().iota(z / half, {s, half}).cast(luminal::DType::F32);
    GraphTensor frequency = x.graph().iota(z % half, {s, half}).cast(luminal::DType::F32) * (-2.0 / d.head_dim);
    GraphTensor angle = position * (frequency * std::log2(500000.0)).exp2();
    GraphTensor cos = angle.cos().unsqueeze(1), sin = angle.sin().unsqueeze(1);
    GraphTensor x1 = x.slice_along(-1, 0, half), x2 = x.slice_along(-1, half, d.head_dim);
    cos = cos.expand({s, x.dim(1), half});
    sin = sin.expand({s, x.dim(1), half});
    return (x1 * cos - x2 * sin).concat_along(x2 * cos + x1 * sin, -1);
}

inline GraphTensor build_llama(luminal::Graph& g, int layers, const Dims& d) {
    Expression s = 's';
    GraphTensor tokens = g.named_tensor("tokens", {s}, luminal::DType::I32);
    GraphTensor x = g.named_tensor("embed", {d.vocab, d.hidden}).index_select(0, tokens);
    for (int l = 0; l < layers; ++l) {
        auto weight = [&](const char* name, int rows, int cols) {
            return g.named_tensor(std::string(name) + std::to_string(l), {rows, cols});
        };
        GraphTensor h = x.rms_norm({-1}, 1e-5);
        GraphTensor q = h.matmul(weight("wq", d.hidden, d.heads * d.head_dim)).split_dims(-1, d.head_dim);
        GraphTensor k = h.matmul(weight("wk", d.hidden, d.kv_heads * d.head_dim)).split_dims(-1, d.head_dim);
        GraphTensor v = h.matmul(weight("wv", d.hidden, d.kv_heads * d.head_dim)).split_dims(-1, d.head_dim);
        q = rotate_half_rope(q, d).split_dims(1, d.heads / d.kv_heads);  // [s, kv, group, hd]
        k = rotate_half_rope(k, d);
        GraphTensor qh = q.permute({1, 2, 0, 3});                                          // [kv, g, s, hd]
        GraphTensor kh = k.permute({1, 2, 0}).unsqueeze(1).expand_dim(1, d.heads / d.kv_heads).squeeze(2);  // [kv, g, hd, s]
        GraphTensor scores = qh.matmul(kh) * (1.0 / std::sqrt(double(d.head_dim)));
        Expression z = Expression::index();
        GraphTensor future = g.iota(luminal::gt(z % s, z / s), {s, s}).cast(luminal::DType::Bool);
        GraphTensor attn = luminal::where(future, -INFINITY, scores).softmax(-1);
        GraphTensor vh = v.permute({1, 0, 2}).unsqueeze(1).expand_dim(1, d.heads / d.kv_heads).squeeze(2);
        GraphTensor mixed = attn.matmul(vh).permute({2, 0, 1, 3}).reshape({s, d.heads * d.head_dim});
        x = x + mixed.matmul(weight("wo", d.heads * d.head_dim, d.hidden));
        GraphTensor m = x.rms_norm({-1}, 1e-5);
        GraphTensor gate = m.matmul(weight("w1", d.hidden, d.intermediate)).silu();
        GraphTensor up = m.matmul(weight("w3", d.hidden, d.intermediate));
        x = x + (gate * up).matmul(weight("w2", d.intermediate, d.hidden));
    }
    return x.rms_norm({-1}, 1e-5).matmul(g.named_tensor("lm_head", {d.hidden, d.vocab})).output();
}

}  // namespace luminal_bench

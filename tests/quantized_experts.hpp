#pragma once
// Block-quantized experts as a quantized MoE writes them (Dequantize of the
// stacked blocks, reshaped to [E, N, K], index_select of each token's expert,
// a batched matmul), every kept format with f32 activations and rounded to Q8
// blocks, in one graph, 13 tokens with experts 1 and 3 unused:
//  * QuantizedExperts: the 40 rows of tools/gen_quantized_fixtures.py's
//    matrices as 5 experts of 8, one product each;
//  * QuantizedGateUp: the gated form SiLU(gate x) * (up x), gate the first 20
//    rows of each matrix and up the last 20, each as 5 experts of 4 rows.
// A backend's result is checked against the gguf package's dequantized rows
// (tests/data/quantized/products.safetensors) times x by plain loops.
#include <doctest/doctest.h>
#include "test_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <luminal/luminal.hpp>
#include <optional>
#include <string>
#include <vector>

namespace luminal_test {

namespace quantized_experts_detail {

inline constexpr std::int64_t kExperts = 5, kTokens = 13;

// Each token's expert: experts 1 and 3 unused.
inline const std::vector<std::int32_t>& chosen() {
    static const std::vector<std::int32_t> experts{4, 0, 4, 2, 4, 0, 0, 2, 4, 4, 0, 2, 4};
    return experts;
}

// x rounded as llama.cpp's Q8_0 rounds activations: per 32 values d = max|x| / 127, q = round(x / d).
inline std::vector<double> q8_rounded(const float* x, std::int64_t k) {
    std::vector<double> out(static_cast<std::size_t>(k));
    for (std::int64_t b = 0; b < k; b += 32) {
        float amax = 0;
        for (std::int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = amax / 127.0f, inverse = d != 0 ? 1.0f / d : 0.0f;
        for (std::int64_t i = b; i < b + 32; ++i) out[i] = double(std::round(x[i] * inverse)) * double(d);
    }
    return out;
}

// One format and activation mode: its activations, chosen experts, weight blocks and result [tokens, rows, 1].
struct Part {
    luminal::QuantFormat format;
    bool q8;
    std::int64_t cols;
    luminal::GraphTensor x, picked;
    std::vector<luminal::GraphTensor> blocks;  // each a contiguous range of the fixture matrix's rows
    std::optional<luminal::GraphTensor> y;
};

// Experts of `rows` rows of `blocks` for the tokens of `part`, as the models write their products.
inline luminal::GraphTensor expert_products(const Part& part, const luminal::GraphTensor& blocks, std::int64_t rows) {
    using namespace luminal;
    return custom_op(DequantizeOp{part.format, kExperts * rows, part.cols, part.q8}, {blocks})
        .reshape({kExperts, rows, part.cols})
        .index_select(0, part.picked)
        .matmul(part.x.unsqueeze(-1));
}

// The parts of every kept format and activation mode, each with `weights` block inputs of experts of `rows` rows.
inline std::vector<Part> make_parts(luminal::Graph& cx, int weights, std::int64_t rows,
                                    const std::function<luminal::GraphTensor(const Part&)>& result) {
    using namespace luminal;
    std::vector<Part> parts;
    for (QuantFormat format : kBlockQuantized)
        for (bool q8 : {false, true}) {
            const std::int64_t cols = block_elements(format) == 256 ? 512 : 96;
            Part p{format, q8, cols, cx.tensor({kTokens, cols}), cx.tensor({kTokens}, DType::I32), {}, std::nullopt};
            for (int w = 0; w < weights; ++w) p.blocks.push_back(cx.tensor({quantized_bytes(format, kExperts * rows, cols)}, DType::U8));
            p.y = result(p).output();
            parts.push_back(std::move(p));
        }
    return parts;
}

// Binds every part's inputs (block input w: the w-th equal share of the fixture's rows), executes, and checks each
// output [t, o] against want(activations of token t as the product sees them, the dequantized matrix, t, o).
template <typename Compiled>
void run_and_check_parts(Compiled& rt, const luminal::Graph& cx, const std::vector<Part>& parts, std::int64_t rows, double tolerance,
                         const std::function<double(const std::vector<double>&, const std::vector<float>&, std::int64_t, std::int64_t,
                                                    std::int64_t)>& want) {
    using namespace luminal;
    const auto file = io::SafetensorsFile::open(luminal_test::data_dir() / "quantized" / "products.safetensors");
    auto activations = [&](const Part& p) { return io::to_f32(file.at(p.cols == 512 ? "x256" : "x")); };
    for (const Part& p : parts) {
        const auto x = activations(p);
        rt.set_data(p.x, std::vector<float>(x.begin(), x.begin() + kTokens * p.cols));
        rt.set_data(p.picked, chosen());
        const auto blocks = file.at(std::string(io::name_of(p.format)) + ".blocks").bytes;
        const std::size_t share = blocks.size() / p.blocks.size();
        for (std::size_t w = 0; w < p.blocks.size(); ++w) rt.set_bytes(p.blocks[w], std::span(blocks.data() + w * share, share));
    }
    rt.execute(cx.dyn_map());
    for (const Part& p : parts) {
        CAPTURE(io::name_of(p.format));
        CAPTURE(p.q8);
        const auto x = activations(p);
        const auto dequantized = io::to_f32(file.at(std::string(io::name_of(p.format)) + ".dequantized"));
        const auto got = rt.get_f32(*p.y);
        double worst = 0;
        for (std::int64_t t = 0; t < kTokens; ++t) {
            const float* xt = x.data() + t * p.cols;
            const std::vector<double> a = p.q8 ? q8_rounded(xt, p.cols) : std::vector<double>(xt, xt + p.cols);
            for (std::int64_t o = 0; o < rows; ++o) {
                const double expected = want(a, dequantized, p.cols, t, o);
                worst = std::max(worst, std::abs(got[t * rows + o] - expected) / (1 + std::abs(expected)));
            }
        }
        CHECK(worst <= tolerance);
    }
}

// Row `row` of the fixture matrix times a.
inline double dot_row(const std::vector<double>& a, const std::vector<float>& matrix, std::int64_t cols, std::int64_t row) {
    double sum = 0;
    for (std::int64_t i = 0; i < cols; ++i) sum += a[i] * matrix[row * cols + i];
    return sum;
}

}  // namespace quantized_experts_detail

class QuantizedExperts {
public:
    static constexpr std::int64_t kRows = 8;

    luminal::Graph cx;

    QuantizedExperts()
        : parts_(quantized_experts_detail::make_parts(cx, 1, kRows, [](const quantized_experts_detail::Part& p) {
              return quantized_experts_detail::expert_products(p, p.blocks[0], kRows);
          })) {}

    // The program reads every expert product's blocks as they are.
    static void check_program(const std::string& program) {
        CHECK(program.find("ExpertMatmul") != std::string::npos);
        CHECK(program.find("Dequantize") == std::string::npos);
        CHECK(program.find("activations q8") != std::string::npos);
        CHECK(program.find("activations f32") != std::string::npos);
    }

    template <typename Compiled>
    void run_and_check(Compiled& rt) const {
        using namespace quantized_experts_detail;
        run_and_check_parts(rt, cx, parts_, kRows, 2e-5,
                            [](const std::vector<double>& a, const std::vector<float>& matrix, std::int64_t cols, std::int64_t t,
                               std::int64_t o) { return dot_row(a, matrix, cols, chosen()[t] * kRows + o); });
    }

private:
    std::vector<quantized_experts_detail::Part> parts_;
};

class QuantizedGateUp {
public:
    static constexpr std::int64_t kRows = 4;

    luminal::Graph cx;

    QuantizedGateUp()
        : parts_(quantized_experts_detail::make_parts(cx, 2, kRows, [](const quantized_experts_detail::Part& p) {
              using quantized_experts_detail::expert_products;
              return expert_products(p, p.blocks[0], kRows).silu() * expert_products(p, p.blocks[1], kRows);
          })) {}

    template <typename Compiled>
    void run_and_check(Compiled& rt) const {
        using namespace quantized_experts_detail;
        run_and_check_parts(rt, cx, parts_, kRows, 1e-4,
                            [](const std::vector<double>& a, const std::vector<float>& matrix, std::int64_t cols, std::int64_t t,
                               std::int64_t o) {
                                const double gate = dot_row(a, matrix, cols, chosen()[t] * kRows + o),
                                             up = dot_row(a, matrix, cols, (kExperts + chosen()[t]) * kRows + o);
                                return gate / (1 + std::exp(-gate)) * up;
                            });
    }

private:
    std::vector<quantized_experts_detail::Part> parts_;
};

}  // namespace luminal_test

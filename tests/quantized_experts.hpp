#pragma once
// Block-quantized experts as a quantized MoE writes them (Dequantize of the
// stacked blocks, reshaped to [E, N, K], index_select of each token's expert,
// a batched matmul), every kept format with f32 activations and rounded to Q8
// blocks, in one graph: the 40 rows of tools/gen_quantized_fixtures.py's
// matrices as 5 experts of 8, 13 tokens with experts 1 and 3 unused. A
// backend's result is checked against the gguf package's dequantized rows
// (tests/data/quantized/products.safetensors) times x by plain loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace luminal_test {

namespace quantized_experts_detail {

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

}  // namespace quantized_experts_detail

class QuantizedExperts {
public:
    static constexpr std::int64_t kExperts = 5, kRows = 8, kTokens = 13;

    luminal::Graph cx;

    QuantizedExperts() {
        using namespace luminal;
        for (QuantFormat format : kBlockQuantized)
            for (bool q8 : {false, true}) {
                const std::int64_t cols = block_elements(format) == 256 ? 512 : 96;
                const GraphTensor x = cx.tensor({kTokens, cols}), picked = cx.tensor({kTokens}, DType::I32),
                                  blocks = cx.tensor({quantized_bytes(format, kExperts * kRows, cols)}, DType::U8);
                auto w = custom_op(DequantizeOp{format, kExperts * kRows, cols, q8}, {blocks}).reshape({kExperts, kRows, cols});
                const GraphTensor y = w.index_select(0, picked).matmul(x.unsqueeze(-1)).output();  // [tokens, rows, 1]
                parts_.push_back(Part{format, q8, cols, x, picked, blocks, y});
            }
    }

    // The program reads every expert product's blocks as they are.
    static void check_program(const std::string& program) {
        CHECK(program.find("ExpertMatmul") != std::string::npos);
        CHECK(program.find("Dequantize") == std::string::npos);
        CHECK(program.find("activations q8") != std::string::npos);
        CHECK(program.find("activations f32") != std::string::npos);
    }

    template <typename Compiled>
    void run_and_check(Compiled& rt) const {
        using namespace luminal;
        const auto file = io::SafetensorsFile::open(std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "quantized" / "products.safetensors");
        for (const Part& p : parts_) {
            const auto activations = io::to_f32(file.at(p.cols == 512 ? "x256" : "x"));
            rt.set_data(p.x, std::vector<float>(activations.begin(), activations.begin() + kTokens * p.cols));
            rt.set_data(p.picked, quantized_experts_detail::chosen());
            rt.set_bytes(p.blocks, file.at(std::string(io::name_of(p.format)) + ".blocks").bytes);
        }
        rt.execute(cx.dyn_map());
        for (const Part& p : parts_) {
            CAPTURE(io::name_of(p.format));
            CAPTURE(p.q8);
            const auto activations = io::to_f32(file.at(p.cols == 512 ? "x256" : "x"));
            const auto dequantized = io::to_f32(file.at(std::string(io::name_of(p.format)) + ".dequantized"));
            const auto got = rt.get_f32(p.y);
            double worst = 0;
            for (std::int64_t t = 0; t < kTokens; ++t) {
                const float* xt = activations.data() + t * p.cols;
                const std::vector<double> a =
                    p.q8 ? quantized_experts_detail::q8_rounded(xt, p.cols) : std::vector<double>(xt, xt + p.cols);
                for (std::int64_t o = 0; o < kRows; ++o) {
                    double want = 0;
                    for (std::int64_t i = 0; i < p.cols; ++i)
                        want += a[i] * dequantized[(quantized_experts_detail::chosen()[t] * kRows + o) * p.cols + i];
                    worst = std::max(worst, std::abs(got[t * kRows + o] - want) / (1 + std::abs(want)));
                }
            }
            CHECK(worst <= 2e-5);
        }
    }

private:
    struct Part {
        luminal::QuantFormat format;
        bool q8;
        std::int64_t cols;
        luminal::GraphTensor x, picked, blocks, y;
    };
    std::vector<Part> parts_;

};

// The gated form of the same products, as a quantized MoE's gate and up
// write it: SiLU(gate x) * (up x), gate the first 20 rows of each format's
// matrix and up the last 20, each as 5 experts of 4 rows.
class QuantizedGateUp {
public:
    static constexpr std::int64_t kExperts = 5, kRows = 4, kTokens = 13;

    luminal::Graph cx;

    QuantizedGateUp() {
        using namespace luminal;
        for (QuantFormat format : kBlockQuantized)
            for (bool q8 : {false, true}) {
                const std::int64_t cols = block_elements(format) == 256 ? 512 : 96, half = quantized_bytes(format, kExperts * kRows, cols);
                const GraphTensor x = cx.tensor({kTokens, cols}), picked = cx.tensor({kTokens}, DType::I32),
                                  gate_blocks = cx.tensor({half}, DType::U8), up_blocks = cx.tensor({half}, DType::U8);
                auto product = [&](const GraphTensor& blocks) {
                    return custom_op(DequantizeOp{format, kExperts * kRows, cols, q8}, {blocks})
                        .reshape({kExperts, kRows, cols})
                        .index_select(0, picked)
                        .matmul(x.unsqueeze(-1));
                };
                const GraphTensor y = (product(gate_blocks).silu() * product(up_blocks)).output();  // [tokens, rows, 1]
                parts_.push_back(Part{format, q8, cols, x, picked, gate_blocks, up_blocks, y});
            }
    }

    template <typename Compiled>
    void run_and_check(Compiled& rt) const {
        using namespace luminal;
        using quantized_experts_detail::chosen;
        const auto file = io::SafetensorsFile::open(std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "quantized" / "products.safetensors");
        for (const Part& p : parts_) {
            const auto activations = io::to_f32(file.at(p.cols == 512 ? "x256" : "x"));
            rt.set_data(p.x, std::vector<float>(activations.begin(), activations.begin() + kTokens * p.cols));
            rt.set_data(p.picked, chosen());
            const auto blocks = file.at(std::string(io::name_of(p.format)) + ".blocks").bytes;
            const auto half = static_cast<std::ptrdiff_t>(blocks.size() / 2);
            rt.set_bytes(p.gate_blocks, std::span(blocks.data(), blocks.size() / 2));
            rt.set_bytes(p.up_blocks, std::span(blocks.data() + half, blocks.size() / 2));
        }
        rt.execute(cx.dyn_map());
        for (const Part& p : parts_) {
            CAPTURE(io::name_of(p.format));
            CAPTURE(p.q8);
            const auto activations = io::to_f32(file.at(p.cols == 512 ? "x256" : "x"));
            const auto dequantized = io::to_f32(file.at(std::string(io::name_of(p.format)) + ".dequantized"));
            const auto got = rt.get_f32(p.y);
            double worst = 0;
            for (std::int64_t t = 0; t < kTokens; ++t) {
                const float* xt = activations.data() + t * p.cols;
                const std::vector<double> a =
                    p.q8 ? quantized_experts_detail::q8_rounded(xt, p.cols) : std::vector<double>(xt, xt + p.cols);
                for (std::int64_t o = 0; o < kRows; ++o) {
                    double gate = 0, up = 0;
                    for (std::int64_t i = 0; i < p.cols; ++i) {
                        gate += a[i] * dequantized[(chosen()[t] * kRows + o) * p.cols + i];
                        up += a[i] * dequantized[((kExperts + chosen()[t]) * kRows + o) * p.cols + i];
                    }
                    const double want = gate / (1 + std::exp(-gate)) * up;
                    worst = std::max(worst, std::abs(got[t * kRows + o] - want) / (1 + std::abs(want)));
                }
            }
            CHECK(worst <= 1e-4);
        }
    }

private:
    struct Part {
        luminal::QuantFormat format;
        bool q8;
        std::int64_t cols;
        luminal::GraphTensor x, picked, gate_blocks, up_blocks, y;
    };
    std::vector<Part> parts_;
};

}  // namespace luminal_test

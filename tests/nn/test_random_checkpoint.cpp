// nn::RandomCheckpoint: seeded random weights in every dtype and kept block
// format, bounded as its header states. Bounds are derived by hand: a matrix of
// fan-in n is uniform in +-1/sqrt(n), so its standard deviation is
// 1/sqrt(3n); vectors lie in [0.9, 1.1]. Blocks are decoded by io's GGUF
// decoders (tested against the gguf package), not by the generator.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <luminal/luminal.hpp>
#include <luminal/nn/random_checkpoint.hpp>
#include <numeric>
#include <string>
#include <vector>

namespace {

double standard_deviation(const std::vector<float>& values) {
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    double sum = 0;
    for (float v : values) sum += (v - mean) * (v - mean);
    return std::sqrt(sum / static_cast<double>(values.size()));
}

}  // namespace

TEST_CASE("random weights: matrices uniform in +-1/sqrt(fan-in), vectors in [0.9, 1.1], the same for a seed") {
    luminal::Graph cx;
    luminal::nn::ParameterSet parameters;
    parameters.add(cx, "matrix", {64, 1024});
    parameters.add(cx, "norm", {1024});
    const luminal::nn::RandomCheckpoint weights(parameters, 3);
    CHECK(weights.tensor_names() == std::vector<std::string>{"matrix", "norm"});
    CHECK(weights.shape_of("matrix") == luminal::nn::Dims{64, 1024});
    CHECK_FALSE(weights.shape_of("absent").has_value());

    const std::vector<float> matrix = weights.values("matrix");
    REQUIRE(matrix.size() == 64u * 1024u);
    const double bound = 1.0 / 32.0;
    CHECK(std::all_of(matrix.begin(), matrix.end(), [&](float v) { return std::abs(v) <= bound; }));
    CHECK(standard_deviation(matrix) == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.02));
    const std::vector<float> norm = weights.values("norm");
    CHECK(std::all_of(norm.begin(), norm.end(), [](float v) { return v >= 0.9f && v <= 1.1f; }));

    CHECK(luminal::nn::RandomCheckpoint(parameters, 3).values("matrix") == matrix);
    CHECK(luminal::nn::RandomCheckpoint(parameters, 4).values("matrix") != matrix);

    // bf16 bytes are the f32 values rounded.
    const auto bytes = weights.bytes_as("matrix", luminal::DType::BF16);
    REQUIRE(bytes.has_value());
    REQUIRE(bytes->size() == matrix.size() * 2);
    for (std::size_t i : {std::size_t{0}, std::size_t{777}, matrix.size() - 1}) {
        std::uint16_t bits = 0;
        std::memcpy(&bits, bytes->data() + 2 * i, 2);
        CHECK(bits == luminal::f32_to_bf16_bits(matrix[i]));
    }
    CHECK_FALSE(weights.bytes_as("matrix", luminal::DType::I32).has_value());
    CHECK_THROWS_WITH_AS(weights.values("absent"), doctest::Contains("no tensor 'absent'"), luminal::Error);
}

TEST_CASE("random blocks of every kept format decode to finite values within the matrix's bound, spread across it") {
    luminal::Graph cx;
    luminal::nn::ParameterSet parameters;
    parameters.add(cx, "matrix", {16, 512});
    const luminal::nn::RandomCheckpoint weights(parameters, 11);
    const double bound = 1.0 / std::sqrt(512.0);
    for (luminal::QuantFormat format : luminal::kBlockQuantized) {
        CAPTURE(luminal::io::name_of(format));
        const luminal::nn::StoredBlocks blocks = weights.blocks("matrix", format);
        REQUIRE(static_cast<std::int64_t>(blocks.bytes.size()) == luminal::quantized_bytes(format, 16, 512));
        std::vector<float> values(16 * 512);
        luminal::io::dequantize_blocks(format, blocks.bytes, values);
        CHECK(std::all_of(values.begin(), values.end(), [&](float v) { return std::isfinite(v) && std::abs(v) <= bound * 1.001; }));
        CHECK(standard_deviation(values) > bound / 20);
    }
    CHECK_THROWS_WITH_AS(weights.blocks("matrix", luminal::QuantFormat::Q2_K), doctest::Contains("no random blocks for format"),
                         luminal::Error);
}

TEST_CASE("a model with random weights, f32 and Q8_0 matrices, runs on the CPU to finite logits, the same for a seed") {
    const luminal::io::ModelConfig config = luminal::io::load_model_config(luminal_test::data_dir() / "models" / "llama");
    for (const bool quantized : {false, true}) {
        CAPTURE(quantized);
        luminal::nn::ModelOptions model_options;
        if (quantized)
            for (int layer = 0; layer < 2; ++layer)
                for (const char* matrix : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
                    model_options.quantized.emplace(fmt::format("model.layers.{}.{}.weight", layer, matrix),
                                                    luminal::QuantFormat::Q8_0);
        auto logits_for_seed = [&](std::uint64_t seed) {
            luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, model_options);
            luminal::CompileOptions options;
            options.verbosity = 0;
            luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
            session.load_weights(luminal::nn::RandomCheckpoint(model.parameters, seed));
            return session.forward(std::vector<std::int32_t>{1, 5, 9, 2});
        };
        const std::vector<float> logits = logits_for_seed(5);
        CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
        CHECK(standard_deviation(logits) > 1e-3);
        CHECK(logits_for_seed(5) == logits);
    }
}

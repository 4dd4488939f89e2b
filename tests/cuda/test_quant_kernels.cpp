// GGUF block formats kept quantized on CUDA: the quantized GEMV (f32 and 8-bit
// activations), the device Dequantize and the quantized lookup, their printed
// source run on the host against the ReferenceRuntime (io's dequantizers,
// which match the gguf package); the rules that find them in a quantized
// model's graph; the Q4_K_M GGUF Llama on the host emulator against
// transformers; and the decode plan of a Q4_K_M-shaped Llama-3.1-8B.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <luminal/cuda.hpp>
#include <luminal/cuda/plan_report.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/norm.hpp>
#include <luminal/nn/step_floor.hpp>
#include <random>
#include <vector>

#include "../nn/model_reference.hpp"
#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

constexpr QuantFormat kDeviceFormats[] = {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q5_0,
                                          QuantFormat::Q5_1, QuantFormat::Q4_K, QuantFormat::Q6_K};

// Random blocks of a [rows, cols] matrix: every quant and packed scale byte
// random, the f16 scales (and mins) small and positive, so no block decodes to
// NaN or to values that swamp the others.
std::vector<std::byte> random_blocks(QuantFormat f, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::byte> bytes(static_cast<std::size_t>(quantized_bytes(f, rows, cols)));
    for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
    std::vector<std::size_t> scale_fields{0};
    if (f == QuantFormat::Q4_1 || f == QuantFormat::Q5_1 || f == QuantFormat::Q4_K) scale_fields.push_back(2);
    if (f == QuantFormat::Q6_K) scale_fields = {208};
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    const std::size_t block = io::layout_of(f).block_bytes;
    for (std::size_t at = 0; at < bytes.size(); at += block)
        for (std::size_t field : scale_fields) {
            const std::uint16_t bits = f32_to_f16_bits(scale(rng));
            std::memcpy(bytes.data() + at + field, &bits, sizeof bits);
        }
    return bytes;
}

std::vector<float> random_activations(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

CompileOptions quant_compile_options() {
    CompileOptions o;
    o.verbosity = 0;
    return o;
}

// `g` run on the printed-source emulator (its kernels NVRTC-compiled too) and on the ReferenceRuntime with the same
// inputs; returns both results of each of `outs`.
std::vector<std::pair<std::vector<float>, std::vector<float>>> printed_and_reference(
    Graph& g, Graph& reference_graph, const std::vector<std::pair<GraphTensor, std::vector<std::byte>>>& inputs,
    const std::vector<GraphTensor>& reference_inputs, const std::vector<GraphTensor>& outs,
    const std::vector<GraphTensor>& reference_outs, std::string_view op) {
    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, quant_compile_options());
    const std::string program = report.program.to_string();
    CHECK_MESSAGE(program.find(op) != std::string::npos, program);
    luminal_test::NvrtcCoverage::get().compile(printed.plan());
    auto reference = reference_graph.compile(ReferenceRuntime{}, quant_compile_options());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        printed.set_bytes(inputs[i].first, inputs[i].second);
        reference.set_bytes(reference_inputs[i], inputs[i].second);
    }
    printed.execute(g.dyn_map());
    reference.execute(reference_graph.dyn_map());
    std::vector<std::pair<std::vector<float>, std::vector<float>>> results;
    for (std::size_t i = 0; i < outs.size(); ++i) results.emplace_back(printed.get_f32(outs[i]), reference.get_f32(reference_outs[i]));
    return results;
}

// Each of `got` within `tolerance` of `want`, relative to the larger of it and `scale`.
void check_within(const std::vector<float>& got, const std::vector<float>& want, double tolerance, double scale = 1.0) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(tolerance).scale(scale));
    }
}

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
    return host_buffer_to_bytes(host_buffer_from_values(DType::F32, std::span<const float>(v)));
}

}  // namespace

TEST_CASE("the quantized GEMV: every block format, rows of whole and partial 256-element runs, row tails, 1 and 3 tokens, "
          "f32 and 8-bit activations") {
    constexpr std::int64_t kRows = 37;  // not a whole number of warps, blocks or grids
    // Every case in one graph, so the printed sources compile once.
    struct Case {
        QuantFormat format;
        std::int64_t cols, tokens;
        Activations act;
    };
    std::vector<Case> cases;
    for (QuantFormat f : kDeviceFormats) {
        const bool k_format = block_elements(f) == 256;
        // A row within one chunk, and one of several chunks (the last partial) not a multiple of 256 where blocks allow.
        const std::vector<std::int64_t> row_lengths = k_format ? std::vector<std::int64_t>{256, 3840} : std::vector<std::int64_t>{96, 3872};
        for (std::int64_t cols : row_lengths)
            for (std::int64_t tokens : {1, 3})
                for (Activations act : {Activations::F32, Activations::Q8}) cases.push_back({f, cols, tokens, act});
    }
    Graph g, r;
    std::vector<std::pair<GraphTensor, std::vector<std::byte>>> inputs;
    std::vector<GraphTensor> reference_inputs, outs, reference_outs;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto [f, cols, tokens, act] = cases[i];
        const QuantizedMatmulOp op{f, kRows, cols, act, WeightLayout::Blocks};
        // The reference: QuantizedMatmul's semantics on the ReferenceRuntime (io's decoders, activations rounded by
        // lowering's round_to_q8_blocks).
        for (Graph* graph : {&g, &r}) {
            auto x = graph->named_tensor(fmt::format("x{}", i), {tokens, cols});
            auto blocks = graph->named_tensor(fmt::format("blocks{}", i), {quantized_bytes(f, kRows, cols)}, DType::U8);
            (graph == &g ? outs : reference_outs).push_back(custom_op(op, {x, blocks}).output());
            if (graph == &r) {
                reference_inputs.insert(reference_inputs.end(), {x, blocks});
                continue;
            }
            inputs.emplace_back(x, f32_bytes(random_activations(static_cast<std::size_t>(tokens * cols), cols + tokens)));
            inputs.emplace_back(blocks, random_blocks(f, kRows, cols, static_cast<std::uint64_t>(f) * 7 + cols));
        }
    }
    const auto results = printed_and_reference(g, r, inputs, reference_inputs, outs, reference_outs, "QuantizedMatmul");
    for (std::size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(io::name_of(cases[i].format));
        CAPTURE(cases[i].cols);
        CAPTURE(cases[i].tokens);
        CAPTURE(cases[i].act == Activations::Q8);
        check_within(results[i].first, results[i].second, 1e-4);
    }
}

TEST_CASE("Matmul of a dequantized weight becomes the quantized GEMV; the device Dequantize and the quantized lookup "
          "decode as io does") {
    for (QuantFormat f : kDeviceFormats) {
        CAPTURE(io::name_of(f));
        const std::int64_t rows = 21, cols = block_elements(f) == 256 ? 512 : 160;
        const auto weight = random_blocks(f, rows, cols, 99 + static_cast<std::uint64_t>(f));
        auto product = [&](Graph& g, bool q8) {
            auto x = g.named_tensor("x", {2, cols});
            auto blocks = g.named_tensor("blocks", {quantized_bytes(f, rows, cols)}, DType::U8);
            auto y = x.matmul(custom_op(DequantizeOp{f, rows, cols, q8}, {blocks}).t()).output();
            return std::tuple{x, blocks, y};
        };
        // f32 activations: the graph as written on the reference, the blocks read in place on the printed source.
        {
            Graph g, r;
            auto [x, blocks, y] = product(g, false);
            auto [rx, rblocks, ry] = product(r, false);
            const auto results = printed_and_reference(g, r, {{x, f32_bytes(random_activations(2 * cols, 5))}, {blocks, weight}},
                                                       {rx, rblocks}, {y}, {ry}, "QuantizedMatmul");
            check_within(results[0].first, results[0].second, 1e-4);
        }
        // The whole matrix decoded on the device (what a prefill's cuBLASLt product reads), and, in a graph of
        // its own, rows looked up (the last one out of range in a second run: a fault naming the node).
        const std::vector<std::int32_t> ids{20, 0, 7}, bad_ids{20, 0, 21};
        auto id_bytes = [](const std::vector<std::int32_t>& v) {
            return std::vector<std::byte>(reinterpret_cast<const std::byte*>(v.data()), reinterpret_cast<const std::byte*>(v.data() + v.size()));
        };
        for (bool lookup : {false, true}) {
            CAPTURE(lookup);
            Graph g, r;
            std::vector<GraphTensor> outs, blocks_in, ids_in;
            for (Graph* graph : {&g, &r}) {
                auto blocks = blocks_in.emplace_back(graph->named_tensor("blocks", {quantized_bytes(f, rows, cols)}, DType::U8));
                auto table = custom_op(DequantizeOp{f, rows, cols, false}, {blocks});
                if (!lookup) {
                    outs.push_back((table * 1.0).output());
                    continue;
                }
                auto picked = table.index_select(0, ids_in.emplace_back(graph->named_tensor("ids", {3}, DType::I32)));
                outs.push_back(picked.output());
            }
            auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, quant_compile_options());
            const std::string program = report.program.to_string();
            CHECK_MESSAGE(program.find(lookup ? "QuantizedGather" : "Dequantize") != std::string::npos, program);
            luminal_test::NvrtcCoverage::get().compile(printed.plan());
            auto reference = r.compile(ReferenceRuntime{}, quant_compile_options());
            printed.set_bytes(blocks_in[0], weight);
            reference.set_bytes(blocks_in[1], weight);
            if (lookup) {
                printed.set_bytes(ids_in[0], id_bytes(ids));
                reference.set_bytes(ids_in[1], id_bytes(ids));
            }
            printed.execute(g.dyn_map());
            reference.execute(r.dyn_map());
            check_within(printed.get_f32(outs[0]), reference.get_f32(outs[1]), 1e-6);
            if (lookup) {
                printed.set_bytes(ids_in[0], id_bytes(bad_ids));
                CHECK_THROWS_WITH_AS(printed.execute(g.dyn_map()), doctest::Contains("kernel fault 1"), Error);
            }
        }
    }
}

// The quantized GEMV takes cuda.Gemv's prologue and epilogues: an RMSNorm'd activation, gate and up (Q4_K) as
// one launch over both weights with SiLU(gate) * up, the down product (Q8_0) with the residual add.
TEST_CASE("the quantized decode GEMV: an RMSNorm prologue, Q4_K gate and up with SiLU(gate) * up in one launch, a "
          "residual epilogue") {
    constexpr std::int64_t kHidden = 256, kIntermediate = 96;  // one Q4_K super-block per row; three Q8_0 blocks
    for (std::int64_t tokens : {1, 3})
        for (bool q8 : {false, true}) {
            CAPTURE(tokens);
            CAPTURE(q8);
            Graph g, r;
            std::vector<std::vector<GraphTensor>> ins(2);
            std::vector<GraphTensor> outs;
            for (Graph* graph : {&g, &r}) {
                auto& in = ins[graph == &g ? 0 : 1];
                auto x = in.emplace_back(graph->named_tensor("x", {tokens, kHidden}));
                auto norm_weight = in.emplace_back(graph->named_tensor("norm", {kHidden}));
                // On the printed source the graph a quantized model writes; on the reference QuantizedMatmul's
                // semantics (io's decoders, activations rounded by lowering's round_to_q8_blocks).
                auto product = [&](GraphTensor a, const char* name, QuantFormat f, std::int64_t rows, std::int64_t cols) {
                    auto blocks = in.emplace_back(graph->named_tensor(name, {quantized_bytes(f, rows, cols)}, DType::U8));
                    if (graph == &r)
                        return custom_op(QuantizedMatmulOp{f, rows, cols, q8 ? Activations::Q8 : Activations::F32, WeightLayout::Blocks},
                                         {a, blocks});
                    return a.matmul(custom_op(DequantizeOp{f, rows, cols, q8}, {blocks}).t());
                };
                auto h = nn::RmsNorm{norm_weight, 1e-5}(x);
                auto gate = product(h, "gate", QuantFormat::Q4_K, kIntermediate, kHidden);
                auto up = product(h, "up", QuantFormat::Q4_K, kIntermediate, kHidden);
                outs.push_back((x + product(gate.silu() * up, "down", QuantFormat::Q8_0, kHidden, kIntermediate)).output());
            }
            auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, quant_compile_options());
            const auto count = [&](std::string_view op) {
                return std::count_if(printed.nodes().begin(), printed.nodes().end(),
                                     [&](const ProgramNode& n) { return n.spec.op.payload && n.spec.op.payload->name() == op; });
            };
            // Gate and up as one, down with the residual; the norm computed inside the first.
            REQUIRE_MESSAGE(count("cuda.Gemv") == 2, report.program.to_string());
            CHECK_MESSAGE(count("cuda.Row") == 0, report.program.to_string());
            luminal_test::NvrtcCoverage::get().compile(printed.plan());
            auto reference = r.compile(ReferenceRuntime{}, quant_compile_options());
            const std::vector<std::vector<std::byte>> data{
                f32_bytes(random_activations(static_cast<std::size_t>(tokens * kHidden), 3)), f32_bytes(random_activations(kHidden, 4)),
                random_blocks(QuantFormat::Q4_K, kIntermediate, kHidden, 5), random_blocks(QuantFormat::Q4_K, kIntermediate, kHidden, 6),
                random_blocks(QuantFormat::Q8_0, kHidden, kIntermediate, 7)};
            for (std::size_t i = 0; i < data.size(); ++i) {
                printed.set_bytes(ins[0][i], data[i]);
                reference.set_bytes(ins[1][i], data[i]);
            }
            printed.execute(g.dyn_map());
            reference.execute(r.dyn_map());
            const auto want = reference.get_f32(outs[1]);
            // 8-bit activations: where the f32 sums differ a rounding step may fall the other way, moving a result
            // by a step of its block (relative to the largest results, not to one that cancels).
            double largest = 1;
            for (float v : want) largest = std::max(largest, std::fabs(static_cast<double>(v)));
            check_within(printed.get_f32(outs[0]), want, 1e-4, q8 ? largest : 1.0);
        }
}

// tools/gen_gguf_q4_k_m_fixtures.py's Llama (Q4_K and Q6_K super-blocks, the Q6_K embedding doubling as the LM
// head) with its blocks kept on the CUDA backend, against transformers, within the CPU tests' tolerances.
TEST_CASE("a Q4_K_M GGUF Llama with its blocks kept on the CUDA backend matches transformers on the host emulator") {
    const auto dir = luminal_test::data_dir() / "gguf_model_q4_k_m";
    const auto pretrained = nn::PretrainedModel::open(dir / "model.gguf");
    nn::ModelOptions options;
    options.quantized = pretrained.quantized_weights();
    const auto load = [&](auto& session) {
        session.load_weights(pretrained);
        const std::string program = session.report().program.to_string();
        CHECK(program.find("QuantizedMatmul Q4_K") != std::string::npos);
        CHECK(program.find("QuantizedMatmul Q6_K") != std::string::npos);
        CHECK(program.find("QuantizedGather Q6_K") != std::string::npos);
        CHECK(program.find(options.q8_activations ? "activations q8" : "activations f32") != std::string::npos);
    };
    SUBCASE("f32 activations") {
        options.q8_activations = false;
        luminal_test::check_against_reference<luminal_test::CompilingEmulator>(pretrained.config(), load, dir / "reference.safetensors",
                                                                               luminal_test::greedy_pick, "", options);
    }
    SUBCASE("8-bit activations") {
        luminal_test::check_against_reference<luminal_test::CompilingEmulator>(pretrained.config(), load, dir / "reference.safetensors",
                                                                               luminal_test::greedy_pick, "", options, 0.25);
    }
}

// tools/gen_gguf_arch_fixtures.py's qwen3moe file (f16 experts stacked as llama.cpp's converter writes them, a dense
// layer between the sparse ones) on the CUDA backend: experts read in place, routing sorted on the device.
TEST_CASE("a qwen3moe GGUF file on the CUDA backend matches transformers on the host emulator") {
    const auto dir = luminal_test::data_dir() / "gguf_arch" / "qwen3moe";
    const auto pretrained = nn::PretrainedModel::open(dir / "model.gguf");
    const auto load = [&](auto& session) {
        session.load_weights(pretrained);
        const std::string program = session.report().program.to_string();
        CHECK(program.find("ExpertMatmul") != std::string::npos);
        CHECK(program.find("Argsort descending") != std::string::npos);
    };
    luminal_test::check_against_reference<luminal_test::CompilingEmulator>(pretrained.config(), load, dir / "reference.safetensors");
}

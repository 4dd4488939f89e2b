// The printed CUDA source run on the host (printed_source_runner.hpp): what
// the IR interpreter shows of the kernels, shown of the text NVRTC compiles,
// including the warp shuffles and block barriers the interpreter folds in
// another order. Against the reference runtime, the interpreter and
// transformers' logits.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <vector>

#include "../nn/model_reference.hpp"
#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

std::vector<float> wave(std::size_t n, double phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(2.5 * std::sin(0.61 * static_cast<double>(i) + phase));
    return v;
}

// Every thread layout of the emulator's reductions and row kernels, printed and run on the host, against the
// interpreter. `bound` gives the data of each Input by label; a Constant input holds its value.
void check_every_layout(const luminal_test::PrintedSourceEmulator& rt, const std::map<std::string, const HostBuffer*>& bound,
                        const DynMap& dims) {
    const cuda::Plan& plan = rt.plan();
    const std::vector<ProgramNode>& nodes = rt.nodes();
    std::vector<cuda::Kernel> variants;
    std::vector<std::vector<const HostBuffer*>> variant_inputs;
    std::deque<HostBuffer> constants;
    for (std::uint32_t id = 0; id < nodes.size(); ++id) {
        const cuda::PlannedNode& p = plan.nodes[id];
        if (!p.kernel || p.kernel->shape == cuda::Kernel::Shape::Elementwise) continue;
        std::vector<const HostBuffer*> inputs;
        for (std::uint32_t s : nodes[id].sources) {
            const NodeSpec& source = nodes[s].spec;
            if (source.kind == symbol_of(OpKind::Constant)) {
                HostBuffer& c = constants.emplace_back(source.dtype, 1);
                c.store_double(0, source.op.value);
                inputs.push_back(&c);
            } else {
                REQUIRE(source.kind == symbol_of(OpKind::Input));
                inputs.push_back(bound.at(source.op.label));
            }
        }
        const bool row = p.kernel->shape == cuda::Kernel::Shape::Row;
        for (auto strategy : {cuda::ReduceStrategy::ThreadPerOutput, cuda::ReduceStrategy::WarpPerOutput,
                              cuda::ReduceStrategy::BlockPerOutput}) {
            if (row && strategy == cuda::ReduceStrategy::ThreadPerOutput) continue;
            cuda::Kernel k = *p.kernel;
            k.strategy = strategy;
            variants.push_back(k);
            variant_inputs.push_back(inputs);
        }
    }
    REQUIRE_FALSE(variants.empty());
    std::vector<std::string> sources;
    for (const cuda::Kernel& k : variants) sources.push_back(cuda::kernel_source(k));
    luminal_test::PrintedSourceExecutor printed;
    printed.prepare(sources);
    for (std::size_t v = 0; v < variants.size(); ++v) {
        const cuda::Kernel& k = variants[v];
        CAPTURE(cuda::name_of(k.strategy));
        CAPTURE(static_cast<int>(k.shape));
        const std::vector<const HostBuffer*>& ins = variant_inputs[v];
        for (std::size_t i = 0; i < k.inputs.size(); ++i) REQUIRE(k.inputs[i] == ins[i]->dtype);
        const auto n = static_cast<std::size_t>(k.count.eval(dims));
        HostBuffer want(k.out, n), got(k.out, n);
        cuda::interpret(k, cuda::KernelBuffers{ins, want, dims});
        printed.run(k, cuda::KernelBuffers{ins, got, dims});
        for (std::size_t i = 0; i < n; ++i) CHECK(got.as_double(i) == doctest::Approx(want.as_double(i)).epsilon(1e-5));
    }
}

}  // namespace

TEST_CASE("printed row kernels and reductions, every thread layout, equal the interpreter on the host") {
    SUBCASE("softmax rows longer than a block's stride") {
        Graph g;
        auto x = g.named_tensor("x", {5, 150});
        x.softmax(-1).output();
        auto rt = g.compile(luminal_test::PrintedSourceEmulator{});
        const HostBuffer xs = host_buffer_from_values(DType::F32, std::span<const float>(wave(5 * 150, 0.3)));
        check_every_layout(rt, {{"x", &xs}}, g.dyn_map());
    }
    SUBCASE("RMSNorm with bf16 weights") {
        Graph g;
        auto x = g.named_tensor("x", {4, 96});
        auto w = g.named_tensor("w", {96}, DType::BF16);
        (x.rms_norm({-1}, 1e-6) * ops::cast(w, DType::F32).expand({4, 96})).output();
        auto rt = g.compile(luminal_test::PrintedSourceEmulator{});
        const HostBuffer xs = host_buffer_from_values(DType::F32, std::span<const float>(wave(4 * 96, 0.1)));
        const HostBuffer ws = host_buffer_from_values(DType::BF16, std::span<const float>(wave(96, 1.7)));
        check_every_layout(rt, {{"x", &xs}, {"w", &ws}}, g.dyn_map());
    }
    SUBCASE("a sum over a middle axis and a max over the last") {
        const HostBuffer xs = host_buffer_from_values(DType::F32, std::span<const float>(wave(3 * 41 * 5, 0.9)));
        for (int axis : {1, 2}) {
            CAPTURE(axis);
            Graph g;
            auto x = g.named_tensor("x", {3, 41, 5});
            (axis == 1 ? x.sum(1) : x.max(2)).output();
            auto rt = g.compile(luminal_test::PrintedSourceEmulator{});
            check_every_layout(rt, {{"x", &xs}}, g.dyn_map());
        }
    }
}

TEST_CASE("graphs through the printed sources on the host equal the reference runtime") {
    auto compare = [](Graph& g, const std::vector<std::pair<GraphTensor, HostBuffer>>& inputs, const std::vector<GraphTensor>& outputs) {
        auto printed = g.compile(luminal_test::PrintedSourceEmulator{});
        luminal_test::expect_reference_outputs(g, printed, inputs, outputs, 1e-5);
    };
    SUBCASE("a bf16 GEMV (the 16-byte-load form), gathers and a scatter with repeated indexes") {
        Graph g;
        auto x = g.named_tensor("x", {1, 64});
        auto w = g.named_tensor("w", {96, 64}, DType::BF16);
        auto table = g.named_tensor("table", {7, 96});
        auto ids = g.named_tensor("ids", {3}, DType::I32);
        auto dest = g.named_tensor("dest", {9});
        auto at = g.named_tensor("at", {4}, DType::I64);
        auto src = g.named_tensor("src", {4});
        auto y = (ops::matmul(x, ops::transpose(ops::cast(w, DType::F32), 0, 1)) + ops::index_select(table, 0, ids).sum(0).unsqueeze(0)).output();
        auto scattered = ops::scatter(dest, at, src).output();
        compare(g,
                {{x, host_buffer_from_values(DType::F32, std::span<const float>(wave(64, 0.2)))},
                 {w, host_buffer_from_values(DType::BF16, std::span<const float>(wave(96 * 64, 0.4)))},
                 {table, host_buffer_from_values(DType::F32, std::span<const float>(wave(7 * 96, 0.5)))},
                 {ids, host_buffer_from_values(DType::I32, std::span<const std::int32_t>(std::vector<std::int32_t>{6, 0, 6}))},
                 {dest, host_buffer_from_values(DType::F32, std::span<const float>(wave(9, 0.6)))},
                 {at, host_buffer_from_values(DType::I64, std::span<const std::int64_t>(std::vector<std::int64_t>{2, 8, 2, 0}))},
                 {src, host_buffer_from_values(DType::F32, std::span<const float>(wave(4, 0.7)))}},
                {y, scattered});
    }
    SUBCASE("f16 and integer arithmetic and casts") {
        Graph g;
        auto a = g.named_tensor("a", {6, 10}, DType::F16);
        auto n = g.named_tensor("n", {6, 10}, DType::I32);
        auto out = (ops::cast(a, DType::F32) * 3.0 + ops::cast(n % 7, DType::F32) + g.arange(10, DType::F32).expand_dim(0, 6)).output();
        std::vector<std::int32_t> ns(60);
        for (std::size_t i = 0; i < ns.size(); ++i) ns[i] = static_cast<std::int32_t>(i * 37 % 101) - 50;
        compare(g,
                {{a, host_buffer_from_values(DType::F16, std::span<const float>(wave(60, 0.8)))},
                 {n, host_buffer_from_values(DType::I32, std::span<const std::int32_t>(ns))}},
                {out});
    }
}

TEST_CASE("the Llama family through the printed sources on the host matches transformers") {
    const auto dir = luminal_test::data_dir() / "models" / "llama";
    const auto weights = io::SafetensorsModel::open(dir);
    luminal_test::check_against_reference<luminal_test::PrintedSourceEmulator>(
        io::load_model_config(dir), [&](auto& session) { session.load_weights(weights); }, dir / "reference.safetensors");
}

// The mixture-of-experts families as CUDA runs them (routing by Argsort, ExpertMatmul reading the chosen experts in place),
// prefill and 8 greedy steps, on the host emulator and through the printed sources.
TEST_CASE("the Qwen3-MoE and Gemma 4 MoE families on the CUDA backend, emulated and through the printed sources, match transformers") {
    for (const char* name : {"qwen3_moe", "gemma4_moe"}) {
        CAPTURE(name);
        const auto dir = luminal_test::data_dir() / "models" / name;
        const auto weights = io::SafetensorsModel::open(dir);
        auto load = [&](auto& session) { session.load_weights(weights); };
        luminal_test::check_against_reference<luminal_test::CompilingEmulator>(io::load_model_config(dir), load, dir / "reference.safetensors");
        luminal_test::check_against_reference<luminal_test::PrintedSourceEmulator>(io::load_model_config(dir), load,
                                                                                   dir / "reference.safetensors");
    }
}

// The cache dtype generate uses on CUDA: keys and values rounded to bf16 as they are written, so the logits move by
// about bf16's relative step (2^-8) of the attention outputs; the greedy ids of the fixture must not change.
TEST_CASE("the Llama family with a bf16 KV cache through the printed sources stays within bf16 rounding of transformers") {
    const auto dir = luminal_test::data_dir() / "models" / "llama";
    const auto weights = io::SafetensorsModel::open(dir);
    nn::ModelOptions options;
    options.kv_dtype = DType::BF16;
    luminal_test::check_against_reference<luminal_test::PrintedSourceEmulator>(
        io::load_model_config(dir), [&](auto& session) { session.load_weights(weights); }, dir / "reference.safetensors",
        luminal_test::greedy_pick, "", options, 2e-2);
}

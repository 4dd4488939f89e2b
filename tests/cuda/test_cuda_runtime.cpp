// CudaRuntime on a real device: skipped (reported by doctest as skipped,
// "needs a CUDA device") where none is present, except the check that asking
// for it then is a clear Error. scripts/gpu_check.sh runs these on a GPU.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <algorithm>
#include <filesystem>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <vector>

#include "../nn/model_reference.hpp"
#include "../argsort_cases.hpp"
#include "../quantized_experts.hpp"

using namespace luminal;

namespace {

const bool kDevice = cuda::device_available();

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
    return v;
}

}  // namespace

TEST_CASE("without a CUDA device, asking for the CUDA runtime is an Error saying so" * doctest::skip(kDevice)) {
    CHECK_THROWS_WITH_AS(cuda::CudaRuntime{}, doctest::Contains("no CUDA device"), Error);
}

TEST_SUITE("needs a CUDA device" * doctest::skip(!kDevice)) {

TEST_CASE("matmul, softmax and a gather on the device equal the reference") {
    Graph g;
    auto a = g.named_tensor("a", {'s', 64});
    auto w = g.named_tensor("w", {96, 64});
    auto ids = g.named_tensor("ids", {'s'}, DType::I32);
    auto table = g.named_tensor("table", {10, 96});
    g.set_dim('s', 5);
    auto y = (ops::softmax(ops::matmul(a, ops::transpose(w, 0, 1)), 1) + ops::index_select(table, 0, ids)).output();
    auto gpu = g.compile(cuda::CudaRuntime{});
    auto ref = g.compile(ReferenceRuntime{});
    const auto av = ramp(5 * 64, 0.05f), wv = ramp(96 * 64, 0.02f), tv = ramp(10 * 96, 0.1f);
    const std::vector<std::int32_t> iv{3, 0, 9, 9, 1};
    gpu.set_data(a, av), gpu.set_data(w, wv), gpu.set_data(table, tv), gpu.set_data(ids, iv);
    ref.set_data(a, av), ref.set_data(w, wv), ref.set_data(table, tv), ref.set_data(ids, iv);
    for (int step = 0; step < 3; ++step) gpu.execute(g.dyn_map());  // the third replays a captured graph
    ref.execute(g.dyn_map());
    CHECK(luminal_test::max_abs_diff(gpu.get_f32(y), ref.get_f32(y)) < 1e-5);
    CHECK(gpu.graph_replays() >= 1);
    gpu.set_data(ids, std::vector<std::int32_t>{3, 0, 10, 9, 1});
    CHECK_THROWS_WITH_AS(gpu.execute(g.dyn_map()), doctest::Contains("out of range"), Error);
}

TEST_CASE("a bf16 product and the residual added in cuBLASLt's epilogue on the device equal the reference") {
    Graph g;
    auto x = g.named_tensor("x", {'s', 256});
    auto w = g.named_tensor("w", {192, 256}, DType::BF16);
    auto residual = g.named_tensor("residual", {'s', 192});
    g.set_dim('s', 300);
    auto rows = x.cast(DType::BF16).cast(DType::F32);
    auto y = (residual + ops::matmul(rows, ops::transpose(w.cast(DType::F32), 0, 1))).output();
    CompileOptions options;
    options.workloads = {{DynMap{{'s', 300}}, 1}};
    auto [gpu, report] = compile_with_report(g, cuda::CudaRuntime{}, options);
    CHECK(report.program.to_string().find("cuda.BlasMatmul plus addend") != std::string::npos);
    auto ref = g.compile(ReferenceRuntime{});
    const auto xv = ramp(300 * 256, 0.05f), wv = ramp(192 * 256, 0.02f), rv = ramp(300 * 192, 0.5f);
    gpu.set_data(x, xv), gpu.set_data(w, wv), gpu.set_data(residual, rv);
    ref.set_data(x, xv), ref.set_data(w, wv), ref.set_data(residual, rv);
    gpu.execute(g.dyn_map());
    ref.execute(g.dyn_map());
    CHECK(luminal_test::max_abs_diff(gpu.get_f32(y), ref.get_f32(y)) < 1e-4);
}

// k and v as one batched cuBLASLt call (their weights placed side by side when the program loads, the second bound
// before the first), then rebound (data written into the placed block) and run at a second size.
TEST_CASE("two products of one activation as one batched cuBLASLt call on the device equal the reference") {
    Graph g;
    auto x = g.named_tensor("x", {'s', 256});
    auto wk = g.named_tensor("wk", {128, 256}, DType::BF16);
    auto wv = g.named_tensor("wv", {128, 256}, DType::BF16);
    auto rows = x.cast(DType::BF16).cast(DType::F32);
    auto k = ops::matmul(rows, ops::transpose(wk.cast(DType::F32), 0, 1)).output();
    auto v = (ops::matmul(rows, ops::transpose(wv.cast(DType::F32), 0, 1)) * 2.0f).output();
    CompileOptions options;
    options.workloads = {{DynMap{{'s', 300}}, 1}};
    auto [gpu, report] = compile_with_report(g, cuda::CudaRuntime{}, options);
    const cuda::Plan plan = cuda::plan_program(cuda::schedule_for_groups(report.program));
    CHECK(std::count_if(plan.batch.begin(), plan.batch.end(), [](std::uint32_t b) { return b != cuda::kNoBatch; }) == 2);
    auto ref = g.compile(ReferenceRuntime{});
    for (const std::int64_t s : {300, 77}) {
        CAPTURE(s);
        g.set_dim('s', s);
        const auto xv = ramp(static_cast<std::size_t>(s) * 256, 0.05f), kv = ramp(128 * 256, 0.02f), vv = ramp(128 * 256, -0.03f);
        gpu.set_data(wv, vv), gpu.set_data(wk, kv), gpu.set_data(x, xv);
        ref.set_data(wv, vv), ref.set_data(wk, kv), ref.set_data(x, xv);
        gpu.execute(g.dyn_map());
        ref.execute(g.dyn_map());
        CHECK(luminal_test::max_abs_diff(gpu.get_f32(k), ref.get_f32(k)) < 1e-4);
        CHECK(luminal_test::max_abs_diff(gpu.get_f32(v), ref.get_f32(v)) < 1e-4);
    }
}

TEST_CASE("decode-like steps of one size bucket replay one captured graph, each equal to the reference") {
    Graph g;
    auto cache = g.named_tensor("cache", {16, 64});
    auto token = g.named_tensor("token", {1, 64});
    auto seen = cache.slice_along(0, 0, Expression('p'));
    // No Matmul: cuBLASLt's call takes the exact sizes, so it would differ between the steps.
    auto y = (((seen * token.expand({Expression('p'), 64})).sum(1)) * 0.125).softmax(0).output();
    g.set_dim('p', 5);
    auto gpu = g.compile(cuda::CudaRuntime{});
    auto ref = g.compile(ReferenceRuntime{});
    const auto cv = ramp(16 * 64, 0.03f);
    gpu.set_data(cache, cv), ref.set_data(cache, cv);
    for (std::int64_t p = 5; p <= 8; ++p) {  // one bucket: 5..8 round up to 8
        CAPTURE(p);
        g.set_dim('p', p);
        const auto tv = ramp(64, 0.01f * static_cast<float>(p));
        gpu.set_data(token, tv), ref.set_data(token, tv);
        gpu.execute(g.dyn_map());
        ref.execute(g.dyn_map());
        CHECK(luminal_test::max_abs_diff(gpu.get_f32(y), ref.get_f32(y)) < 1e-5);
    }
    CHECK(gpu.graph_captures() == 1);  // at p = 6, the second step of equal work
    CHECK(gpu.graph_replays() == 2);   // p = 7 and 8
}

TEST_CASE("each bundled family on the device matches transformers (f32 weights)") {
    const auto models = luminal_test::data_dir() / "models";
    for (const char* name : {"llama", "qwen3", "gemma3", "qwen3_moe", "gemma4_moe"}) {
        CAPTURE(name);
        const auto dir = models / name;
        REQUIRE(std::filesystem::exists(dir));
        const auto weights = io::SafetensorsModel::open(dir);
        auto load = [&](auto& session) { session.load_weights(weights); };
        luminal_test::check_against_reference<cuda::CudaRuntime>(io::load_model_config(dir), load, dir / "reference.safetensors");
    }
}

TEST_CASE("block-quantized experts on the device, read as their blocks, equal the gguf package's dequantized experts") {
    luminal_test::QuantizedExperts experts;
    CompileOptions options;
    options.verbosity = 0;
    auto [rt, report] = compile_with_report(experts.cx, cuda::CudaRuntime{}, options);
    experts.check_program(report.program.to_string());
    experts.run_and_check(rt);
}

TEST_CASE("argsort and topk_indexes on the device: a bitonic sort per row equals std::stable_sort's order" * doctest::skip(!kDevice)) {
    luminal_test::ArgsortCases cases;
    CompileOptions options;
    options.verbosity = 0;
    auto [rt, report] = compile_with_report(cases.cx, cuda::CudaRuntime{}, options);
    cases.check_program(report.program.to_string());
    cases.run_and_check(rt);
}

TEST_CASE("gate and up of block-quantized experts as one expert GEMV on the device equal the dequantized experts'" *
          doctest::skip(!kDevice)) {
    luminal_test::QuantizedGateUp experts;
    CompileOptions options;
    options.verbosity = 0;
    auto rt = experts.cx.compile(cuda::CudaRuntime{}, options);
    experts.run_and_check(rt);
}

// The plan generate runs: a bf16 cache, the token picked on the device. Each decode step after the first of a
// size bucket replays its graph and moves only the changed dims, the new id and the fault code and picked id.
TEST_CASE("greedy decode steps with the token picked on the device: the fixture's ids, one graph replay and a few bytes per step") {
    const auto dir = luminal_test::data_dir() / "models" / "llama";
    const auto weights = io::SafetensorsModel::open(dir);
    const auto reference = io::SafetensorsFile::open(dir / "reference.safetensors");
    const auto prompt64 = io::to_vector<std::int64_t>(reference.at("prompt_ids"));
    const auto generated = io::to_vector<std::int64_t>(reference.at("generated_ids"));
    nn::ModelOptions options;
    options.context = 32;
    options.kv_dtype = DType::BF16;
    options.last_logits_only = true;
    options.sample_in_graph = true;
    nn::CausalLm model = nn::build_causal_lm(io::load_model_config(dir), options);
    CompileOptions compile;
    compile.verbosity = 0;
    nn::Session session(model, cuda::CudaRuntime{}, compile);
    session.load_weights(weights);
    const std::vector<std::int32_t> prompt(prompt64.begin(), prompt64.end());
    std::vector<std::int32_t> picked{session.next(prompt)};
    for (std::size_t step = 1; step < generated.size(); ++step) {
        const std::size_t before = session.runtime().host_device_bytes();
        picked.push_back(session.next(std::vector<std::int32_t>{picked.back()}));
        CAPTURE(step);
        CHECK(session.runtime().host_device_bytes() - before <= 64);
    }
    CHECK(std::vector<std::int64_t>(picked.begin(), picked.end()) == generated);
    CHECK(session.runtime().graph_replays() >= 1);
}

}  // TEST_SUITE

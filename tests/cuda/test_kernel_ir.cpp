// The CUDA backend's host-checkable parts: kernel IR semantics (through the
// host emulator) against hand-derived values, the printed source, the arena
// plan, the cuBLASLt operand layouts, and NVRTC with its disk cache. What the
// kernels compute on whole graphs and models is checked in test_ops, test_nn
// and test_egraph, where the emulator is one of the runtimes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

cuda::Kernel sum_rows_kernel(cuda::ReduceStrategy strategy) {
    NodeSpec spec = NodeSpec::backend(cuda::ReduceOp{OpKind::SumReduce, 1, strategy, nullptr}, {ShapeTracker({3, 5})}, {3}, DType::F32);
    const DType dtypes[] = {DType::F32};
    return *cuda::kernel_for(spec, dtypes, 0);
}

}  // namespace

namespace {

template <typename Runtime>
void check_gather_fault(const char* message) {
    Graph g;
    auto table = g.named_tensor("table", {4, 2});
    auto ids = g.named_tensor("ids", {3}, DType::I32);
    auto rows = ops::index_select(table, 0, ids).output();
    auto rt = g.compile(Runtime{});
    rt.set_data(table, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
    rt.set_data(ids, std::vector<std::int32_t>{3, 0, 1});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(rows) == std::vector<float>{6, 7, 0, 1, 2, 3});
    rt.set_data(ids, std::vector<std::int32_t>{1, 9, 0});
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains(message), Error);
}

}  // namespace

// The printed source reports the fault after the element's loads (read at 0 in the meantime), not between them.
TEST_CASE("a gather index out of range is an Error naming the node, not a wild read: kernel IR and printed source") {
    check_gather_fault<luminal_test::CompilingEmulator>("out of range");
    check_gather_fault<luminal_test::PrintedSourceEmulator>("kernel fault 1");
}

TEST_CASE("a scatter with repeated indexes keeps the last write, as the device's claim pass does") {
    Graph g;
    auto dest = g.named_tensor("dest", {5});
    auto idx = g.named_tensor("idx", {3}, DType::I64);
    auto src = g.named_tensor("src", {3});
    auto out = ops::scatter(dest, idx, src).output();
    auto rt = g.compile(luminal_test::CompilingEmulator{});
    rt.set_data(dest, std::vector<float>{1, 1, 1, 1, 1});
    rt.set_data(idx, std::vector<std::int64_t>{1, 3, 1});
    rt.set_data(src, std::vector<float>{10, 20, 30});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(out) == std::vector<float>{1, 30, 1, 20, 1});
}

TEST_CASE("integer modulo by zero is an Error") {
    Graph g;
    auto a = g.named_tensor("a", {3}, DType::I32);
    auto b = g.named_tensor("b", {3}, DType::I32);
    auto m = (a % b).output();
    auto rt = g.compile(luminal_test::CompilingEmulator{});
    rt.set_data(a, std::vector<std::int32_t>{7, -7, 5});
    rt.set_data(b, std::vector<std::int32_t>{3, 3, 2});
    rt.execute(g.dyn_map());
    CHECK(rt.get<std::int64_t>(m) == std::vector<std::int64_t>{1, 2, 1});  // floor modulo, as torch.remainder
    rt.set_data(b, std::vector<std::int32_t>{3, 0, 2});
    CHECK_THROWS_WITH_AS(rt.execute(g.dyn_map()), doctest::Contains("modulo by zero"), Error);
}

TEST_CASE("every reduction strategy folds the same rows; each prints its own thread layout") {
    HostBuffer in(DType::F32, 15);
    for (std::size_t i = 0; i < 15; ++i) in.floats[i] = static_cast<double>(i);
    for (auto strategy : {cuda::ReduceStrategy::ThreadPerOutput, cuda::ReduceStrategy::WarpPerOutput,
                          cuda::ReduceStrategy::BlockPerOutput}) {
        CAPTURE(cuda::name_of(strategy));
        const cuda::Kernel k = sum_rows_kernel(strategy);
        HostBuffer out(DType::F32, 3);
        const HostBuffer* inputs[] = {&in};
        DynMap dims;
        cuda::interpret(k, cuda::KernelBuffers{inputs, out, dims});
        CHECK(out.floats == std::vector<double>{0 + 1 + 2 + 3 + 4, 5 + 6 + 7 + 8 + 9, 10 + 11 + 12 + 13 + 14});
        const std::string source = cuda::kernel_source(k);
        CHECK((source.find("__shfl_xor_sync") != std::string::npos) == (strategy != cuda::ReduceStrategy::ThreadPerOutput));
        CHECK((source.find("__syncthreads") != std::string::npos) == (strategy == cuda::ReduceStrategy::BlockPerOutput));
        // A warp per row reading it in order has a 16-byte-load form; planning asks has_vector_form,
        // which must say what printing that form says.
        CHECK(cuda::has_vector_form(k) == (strategy == cuda::ReduceStrategy::WarpPerOutput));
        CHECK(cuda::has_vector_form(k) == cuda::vector_kernel_source(k).has_value());
        if (luminal_test::nvrtc_expected()) CHECK_NOTHROW(cuda::Nvrtc::get().compile(source, 90));
    }
}

TEST_CASE("index arithmetic uses floor division only where an operand can be negative") {
    Graph g;
    auto x = g.named_tensor("x", {6});
    auto padded = ops::pad(x, {{2, 1}}, 0.0).output();  // reads x[i - 2]
    auto rt = g.compile(cuda::HostEmulator{});
    rt.set_data(x, std::vector<float>{1, 2, 3, 4, 5, 6});
    rt.execute(g.dyn_map());
    CHECK(rt.get_f32(padded) == std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6, 0});
    const std::vector<std::string> sources = cuda::plan_sources(rt.plan());
    REQUIRE(!sources.empty());
    for (const std::string& s : sources) {
        const std::string body = s.substr(s.find("extern \"C\""));
        CHECK(body.find("luminal_floor_div(") == std::string::npos);  // element indexes are never negative
    }
}

TEST_CASE("the arena plan never overlaps blocks that are live together, and reuses dead ones") {
    const std::vector<cuda::ArenaRequest> requests{{1000, 0, 2}, {500, 1, 3}, {1000, 3, 4}, {200, 4, 4}};
    const cuda::ArenaPlan plan = cuda::plan_arena(requests);
    for (std::size_t i = 0; i < requests.size(); ++i)
        for (std::size_t j = i + 1; j < requests.size(); ++j) {
            const bool together = requests[i].first <= requests[j].last && requests[j].first <= requests[i].last;
            const bool apart = plan.offsets[i] + requests[i].bytes <= plan.offsets[j] || plan.offsets[j] + requests[j].bytes <= plan.offsets[i];
            CHECK_MESSAGE((!together || apart), "blocks " << i << " and " << j);
            CHECK(plan.offsets[i] % cuda::kArenaAlignment == 0);
        }
    CHECK(plan.offsets[2] == 0);  // block 0 died at node 2
    CHECK(plan.bytes < 1000 + 512 + 1024 + 256);
}

TEST_CASE("cuBLASLt operands: strided matrices, transposed or batched, and what it cannot describe") {
    const ShapeTracker row_major({4, 8});
    CHECK(cuda::blas_layout(row_major));
    const cuda::BlasOperand r = cuda::blas_operand(row_major, {});
    CHECK((r.rows == 4 && r.k == 8 && r.ld == 8 && r.row_major && r.batch == 1));
    const ShapeTracker transposed = ShapeTracker({8, 4}).permute({1, 0});
    CHECK(cuda::blas_layout(transposed));
    const cuda::BlasOperand t = cuda::blas_operand(transposed, {});
    CHECK((t.rows == 4 && t.k == 8 && t.ld == 4 && !t.row_major));
    const cuda::BlasOperand b = cuda::blas_operand(ShapeTracker({3, 4, 8}), {});
    CHECK((b.batch == 3 && b.batch_stride == 32));
    CHECK_FALSE(cuda::blas_layout(ShapeTracker({4, 8}).pad(1, 1, 0)));
    CHECK_FALSE(cuda::blas_layout(ShapeTracker({2, 3, 4, 8}).permute({1, 0, 2, 3})));  // batch axes of strides 32, 96
}

TEST_CASE("NVRTC: a kernel that does not compile is an Error with the log; compiled cubins land in the disk cache") {
    if (!luminal_test::nvrtc_expected()) {
        MESSAGE("skipped: NVRTC not available");
        return;
    }
    const std::string broken = "extern \"C\" __global__ void k() { undefined_name(); }";
    CHECK_THROWS_WITH_AS(cuda::Nvrtc::get().compile(broken, 90, "node 7 (test op)"), doctest::Contains("undefined_name"), Error);
    {
        // With LUMINAL_DUMP the Error names the kernel and where its source and NVRTC's log were written.
        const auto dump = std::filesystem::temp_directory_path() / fmt::format("luminal-dump-{}", ::getpid());
        std::filesystem::remove_all(dump);
        ::setenv("LUMINAL_DUMP", dump.c_str(), 1);
        std::string message;
        try {
            cuda::Nvrtc::get().compile(broken + "\n", 90, "node 7 (test op)");
        } catch (const Error& e) {
            message = e.what();
        }
        ::unsetenv("LUMINAL_DUMP");
        CHECK(message.find("node 7 (test op) does not compile") != std::string::npos);
        std::size_t sources = 0, logs = 0;
        for (const auto& f : std::filesystem::directory_iterator(dump / "kernels")) {
            CHECK(message.find(f.path().string()) != std::string::npos);
            sources += f.path().extension() == ".cu";
            logs += f.path().extension() == ".log";
        }
        CHECK(sources == 1);
        CHECK(logs == 1);
        std::filesystem::remove_all(dump);
    }
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("luminal-kernel-cache-{}", ::getpid());
    std::filesystem::remove_all(dir);
    ::setenv("LUMINAL_CACHE_DIR", dir.c_str(), 1);
    const std::string source = fmt::format("extern \"C\" __global__ void k(float* o) {{ o[0] = {}.0f; }}\n", ::getpid());
    const std::size_t compiled = cuda::Nvrtc::get().compile(source, 90)->size();
    CHECK(compiled > 0);
    CHECK(cuda::Nvrtc::get().cached_on_disk(source, 90));
    CHECK_FALSE(cuda::Nvrtc::get().cached_on_disk(source + " ", 90));
    ::unsetenv("LUMINAL_CACHE_DIR");
    std::filesystem::remove_all(dir);
}

TEST_CASE("a reduction of an elementwise expression runs as one kernel that folds the expression") {
    Graph g;
    auto x = g.named_tensor("x", {2, 3});
    auto mean_square = ((x * x).sum(1) * (1.0 / 3)).output();
    auto rt = g.compile(luminal_test::CompilingEmulator{});
    rt.set_data(x, std::vector<float>{1, 2, 3, -4, 0, 2});
    rt.execute(g.dyn_map());
    const std::vector<float> got = rt.get_f32(mean_square);
    CHECK(got[0] == doctest::Approx(14.0 / 3));
    CHECK(got[1] == doctest::Approx(20.0 / 3));
    std::size_t folded_products = 0, elementwise_products = 0;
    for (const cuda::PlannedNode& p : rt.plan().nodes) {
        if (!p.kernel) continue;
        bool multiplies = false;
        for (const cuda::Step& s : p.kernel->body.steps) multiplies |= s.kind == cuda::StepKind::Binary && s.op == OpKind::Mul;
        if (!multiplies) continue;
        if (p.kernel->shape == cuda::Kernel::Shape::Reduce) ++folded_products;
        else ++elementwise_products;
    }
    CHECK(folded_products == 1);  // x * x is computed inside the reduction
}

TEST_CASE("a decode GEMV streams its bf16 weights as 16-byte loads where rows are aligned, and it compiles") {
    Graph g;
    auto x = g.named_tensor("x", {1, 64});
    auto w = g.named_tensor("w", {96, 64}, DType::BF16);
    ops::matmul(x, ops::transpose(ops::cast(w, DType::F32), 0, 1)).output();
    auto rt = g.compile(cuda::HostEmulator{});
    std::size_t gemvs = 0;
    for (const cuda::PlannedNode& p : rt.plan().nodes) {
        const auto* gemv = dynamic_cast<const cuda::GemvKernel*>(p.custom.get());
        if (!gemv) continue;
        ++gemvs;
        CHECK(gemv->vector_width(0) == 8);  // 16 bytes of bf16
        const std::string source = gemv->source();
        CHECK(source.find("reinterpret_cast<const uint4*>") != std::string::npos);
        if (luminal_test::nvrtc_expected()) CHECK_NOTHROW(cuda::Nvrtc::get().compile(source, 90));
    }
    CHECK(gemvs == 1);
    // A row length that is not a multiple of 8 keeps the generated reduction, in its scalar form.
    Graph h;
    auto y = h.named_tensor("y", {1, 60});
    auto v = h.named_tensor("v", {96, 60}, DType::BF16);
    ops::matmul(y, ops::transpose(ops::cast(v, DType::F32), 0, 1)).output();
    auto odd = h.compile(cuda::HostEmulator{});
    for (const cuda::PlannedNode& p : odd.plan().nodes) {
        CHECK(p.custom == nullptr);
        if (p.kernel && cuda::vector_kernel_source(*p.kernel)) CHECK_FALSE(cuda::vector_launch_ok(*p.kernel, h.dyn_map()));
    }
}

namespace {

std::vector<float> wavy(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3);
    return v;
}

// The row kernels of a compiled graph; every other kernel must be an Output's copy (a single load).
std::vector<cuda::Kernel> row_kernels_only(const cuda::Plan& plan) {
    std::vector<cuda::Kernel> rows;
    for (const cuda::PlannedNode& p : plan.nodes) {
        if (!p.kernel) continue;
        if (p.kernel->shape == cuda::Kernel::Shape::Row) rows.push_back(*p.kernel);
        else CHECK(p.kernel->body.steps.size() == 2);  // load + cast into the output buffer
    }
    return rows;
}

}  // namespace

TEST_CASE("softmax and RMSNorm each run as one row kernel, equal to values computed here") {
    constexpr std::size_t rows = 3, length = 40;  // a row longer than a warp, not a multiple of it
    const std::vector<float> xs = wavy(rows * length), ws = wavy(length + 7);
    const std::vector<float> weight(ws.begin() + 7, ws.end());
    std::vector<double> softmax(rows * length), rms(rows * length);
    for (std::size_t r = 0; r < rows; ++r) {
        double max = -1e30, sum = 0, squares = 0;
        for (std::size_t k = 0; k < length; ++k) max = std::max(max, double(xs[r * length + k]));
        for (std::size_t k = 0; k < length; ++k) sum += std::exp(xs[r * length + k] - max), squares += double(xs[r * length + k]) * xs[r * length + k];
        for (std::size_t k = 0; k < length; ++k) {
            softmax[r * length + k] = std::exp(xs[r * length + k] - max) / sum;
            rms[r * length + k] = xs[r * length + k] / std::sqrt(squares / length + 1e-5) * weight[k];
        }
    }
    auto check_close = [](const std::vector<float>& got, const std::vector<double>& want) {
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    };
    for (bool is_softmax : {true, false}) {
        CAPTURE(is_softmax);
        Graph g;
        auto x = g.named_tensor("x", {rows, length});
        auto w = g.named_tensor("w", {length});
        auto out = (is_softmax ? x.softmax(-1) : x.rms_norm({-1}, 1e-5) * w.expand({rows, length})).output();
        auto [rt, report] = compile_with_report(g, luminal_test::CompilingEmulator{});
        rt.set_data(x, xs);
        rt.set_data(w, weight);
        rt.execute(g.dyn_map());
        check_close(rt.get_f32(out), is_softmax ? softmax : rms);
        const auto kernels = row_kernels_only(rt.plan());
        REQUIRE(kernels.size() == 1);
        // max, sum, 1/sum; mean square and rsqrt (its scale by 1/n a stage of its own or not)
        if (is_softmax) CHECK(kernels[0].stages.size() == 3u);
        else CHECK((kernels[0].stages.size() == 2u || kernels[0].stages.size() == 3u));
        // The row op's reference semantics, run by the reference runtime on the same program.
        ReferenceRuntime reference;
        reference.load(report.program);
        reference.set_data(x, xs);
        reference.set_data(w, weight);
        reference.execute(g.dyn_map());
        check_close(reference.get_f32(out), is_softmax ? softmax : rms);
        // Both thread layouts print and compile; only the block's needs shared memory and barriers.
        for (auto strategy : {cuda::ReduceStrategy::WarpPerOutput, cuda::ReduceStrategy::BlockPerOutput}) {
            cuda::Kernel k = kernels[0];
            k.strategy = strategy;
            const std::string source = cuda::kernel_source(k);
            const bool block = strategy == cuda::ReduceStrategy::BlockPerOutput;
            CHECK((source.find("__syncthreads()") != std::string::npos) == block);
            CHECK(source.find("__shfl_xor_sync") != std::string::npos);
            if (luminal_test::nvrtc_expected()) CHECK_NOTHROW(cuda::Nvrtc::get().compile(source, 90));
        }
    }
}

// Quantized weights (Q8_0, Q4_0, Q4_1 blocks) on the CPU: products and
// lookups through Dequantize, rewritten to QuantizedMatmul / QuantizedGather,
// against tools/gen_quantized_fixtures.py (the gguf package's quantizer and
// dequantizer, products in float64), on every instruction set this CPU runs
// and at several thread counts; the ReferenceRuntime on the same graphs; the
// thread pool; and the errors for blocks that do not fit.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using luminal::QuantFormat;
using luminal::cpu::quant::Isa;

const std::filesystem::path kQuantizedData = std::filesystem::path(LUMINAL_TEST_DATA_DIR) / "quantized";
constexpr std::int64_t kRows = 40, kCols = 96, kActivationRows = 13;

struct QuantFixture {
    luminal::io::SafetensorsFile file = luminal::io::SafetensorsFile::open(kQuantizedData / "products.safetensors");
    std::vector<float> values(const std::string& name) const { return luminal::io::to_f32(file.at(name)); }
    std::span<const std::byte> blocks(QuantFormat f) const {
        return file.at(std::string(luminal::io::name_of(f)) + ".blocks").bytes;
    }
};

const QuantFixture& quant_fixture() {
    static const QuantFixture fixture;
    return fixture;
}

// |got - want| within float32 summation error of the fixture's float64 sums.
void check_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance = 2e-5) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(double(got[i]) - double(want[i])) / (1 + std::abs(double(want[i]))));
    CHECK(worst <= tolerance);
}

std::vector<float> first_rows(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
    return {v.begin(), v.begin() + rows * cols};
}

// y = x [m, 96] · dequantize(blocks)^T, with the blocks of a [40, 96] weight.
struct QuantizedProduct {
    std::unique_ptr<luminal::Graph> cx;  // on the heap: the tensors point at it
    luminal::GraphTensor x, blocks, y;
};

QuantizedProduct quantized_product(QuantFormat f, std::int64_t m, bool q8_activations) {
    auto cx = std::make_unique<luminal::Graph>();
    auto x = cx->tensor({m, kCols});
    auto blocks = cx->named_tensor("blocks", {luminal::quantized_bytes(f, kRows, kCols)}, luminal::DType::U8);
    const auto w = luminal::custom_op(luminal::DequantizeOp{f, kRows, kCols, q8_activations}, {blocks});
    auto y = x.matmul(w.t()).output();
    return {std::move(cx), x, blocks, y};
}

template <typename Runtime>
std::vector<float> run_product(QuantizedProduct& p, Runtime runtime, QuantFormat f, std::int64_t m,
                               std::string* program = nullptr) {
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto [rt, report] = luminal::compile_with_report(*p.cx, std::move(runtime), options);
    if (program) *program = report.program.to_string();
    rt.set_data(p.x, first_rows(quant_fixture().values("x"), m, kCols));
    rt.set_bytes(p.blocks, quant_fixture().blocks(f));
    rt.execute(p.cx->dyn_map());
    return rt.get_f32(p.y);
}

std::vector<Isa> isas_here() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni})
        if (luminal::cpu::quant::supports(isa)) out.push_back(isa);
    return out;
}

}  // namespace

TEST_CASE("quantized products on the CPU match the gguf package's dequantized weights") {
    const std::vector<Isa> isas = isas_here();
    MESSAGE("instruction sets run here: " << isas.size() << " (best: " << std::string(luminal::cpu::quant::name_of(isas.back())) << ")");
    for (QuantFormat f : {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1})
        for (std::int64_t m : {std::int64_t{1}, std::int64_t{5}, kActivationRows})  // one row, the direct path, the panel path
            for (bool q8 : {false, true})
                for (Isa isa : isas)
                    for (std::size_t threads : {1, 3}) {
                        CAPTURE(luminal::io::name_of(f));
                        CAPTURE(m);
                        CAPTURE(q8);
                        CAPTURE(luminal::cpu::quant::name_of(isa));
                        CAPTURE(threads);
                        QuantizedProduct p = quantized_product(f, m, q8);
                        std::string program;
                        const auto got = run_product(p, luminal::CpuRuntime(luminal::CpuOptions{threads, isa}), f, m, &program);
                        CHECK(program.find("QuantizedMatmul") != std::string::npos);
                        CHECK(program.find("Dequantize") == std::string::npos);
                        const std::string kind = q8 ? ".q8" : ".f32";
                        check_close(got, first_rows(quant_fixture().values(std::string(luminal::io::name_of(f)) + kind),
                                                    m, kRows));
                    }
}

TEST_CASE("8-bit activations are an approximation the fixture can tell apart from f32 ones") {
    // Guards the test above: were both kinds computed alike, one of its checks would fail.
    for (QuantFormat f : {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1}) {
        const std::string name(luminal::io::name_of(f));
        const auto exact = quant_fixture().values(name + ".f32"), rounded = quant_fixture().values(name + ".q8");
        double worst = 0;
        for (std::size_t i = 0; i < exact.size(); ++i)
            worst = std::max(worst, std::abs(double(exact[i]) - double(rounded[i])) / (1 + std::abs(double(exact[i]))));
        CHECK(worst > 1e-3);
    }
}

TEST_CASE("the ReferenceRuntime runs the quantized graph as written: dequantize, then multiply") {
    for (QuantFormat f : {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1}) {
        CAPTURE(luminal::io::name_of(f));
        QuantizedProduct p = quantized_product(f, 5, true);
        check_close(run_product(p, luminal::ReferenceRuntime{}, f, 5),
                    first_rows(quant_fixture().values(std::string(luminal::io::name_of(f)) + ".f32"), 5, kRows), 1e-6);
    }
}

TEST_CASE("QuantizedMatmul's reference semantics round activations as the Q8 kernels do") {
    for (QuantFormat f : {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1}) {
        CAPTURE(luminal::io::name_of(f));
        luminal::Graph cx;
        auto x = cx.tensor({kActivationRows, kCols});
        auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows, kCols)}, luminal::DType::U8);
        auto y = luminal::custom_op(luminal::QuantizedMatmulOp{f, kRows, kCols, luminal::Activations::Q8}, {x, blocks}).output();
        luminal::CompileOptions options;
        options.verbosity = 0;
        auto rt = cx.compile(luminal::ReferenceRuntime{}, options);
        rt.set_data(x, quant_fixture().values("x"));
        rt.set_bytes(blocks, quant_fixture().blocks(f));
        rt.execute(cx.dyn_map());
        check_close(rt.get_f32(y), quant_fixture().values(std::string(luminal::io::name_of(f)) + ".q8"), 1e-6);
    }
}

TEST_CASE("an embedding lookup in a quantized table decodes only the rows it reads") {
    for (QuantFormat f : {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1}) {
        CAPTURE(luminal::io::name_of(f));
        luminal::Graph cx;
        auto ids = cx.tensor({4}, luminal::DType::I32);
        auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows, kCols)}, luminal::DType::U8);
        auto table = luminal::custom_op(luminal::DequantizeOp{f, kRows, kCols, true}, {blocks});
        auto rows = table.index_select(0, ids).output();
        luminal::CompileOptions options;
        options.verbosity = 0;
        auto [rt, report] = luminal::compile_with_report(cx, luminal::CpuRuntime{}, options);
        CHECK(report.program.to_string().find("QuantizedGather") != std::string::npos);
        const std::vector<std::int32_t> picked{7, 0, 39, 7};
        rt.set_data(ids, picked);
        rt.set_bytes(blocks, quant_fixture().blocks(f));
        rt.execute(cx.dyn_map());
        const auto table_values = quant_fixture().values(std::string(luminal::io::name_of(f)) + ".dequantized");
        std::vector<float> want;
        for (std::int32_t id : picked)
            want.insert(want.end(), table_values.begin() + id * kCols, table_values.begin() + (id + 1) * kCols);
        CHECK(rt.get_f32(rows) == want);  // decoding is exact

        rt.set_data(ids, std::vector<std::int32_t>{0, 1, 40, 2});
        CHECK_THROWS_WITH_AS(rt.execute(cx.dyn_map()), doctest::Contains("outside the"), luminal::Error);
    }
}

TEST_CASE("blocks that do not fit the weight are an Error naming sizes, not a crash") {
    const QuantFormat f = QuantFormat::Q4_1;
    luminal::Graph cx;
    auto x = cx.tensor({1, kCols});
    // The input holds one row of blocks less than a [40, 96] matrix needs.
    auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows - 1, kCols)}, luminal::DType::U8);
    auto y = x.matmul(luminal::custom_op(luminal::DequantizeOp{f, kRows, kCols, true}, {blocks}).t()).output();
    luminal::CompileOptions options;
    options.verbosity = 0;
    for (bool cpu : {true, false}) {
        CAPTURE(cpu);
        auto check_run = [&](auto rt) {
            rt.set_data(x, first_rows(quant_fixture().values("x"), 1, kCols));
            rt.set_bytes(blocks, quant_fixture().blocks(f).first(static_cast<std::size_t>(
                                     luminal::quantized_bytes(f, kRows - 1, kCols))));
            CHECK_THROWS_WITH_AS(rt.execute(cx.dyn_map()), doctest::Contains("is 2400 bytes of blocks, the input has 2340"),
                                 luminal::Error);
        };
        if (cpu) check_run(cx.compile(luminal::CpuRuntime{}, options));
        else check_run(cx.compile(luminal::ReferenceRuntime{}, options));
    }
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(f, 4, 100), doctest::Contains("whole blocks of 32"), luminal::Error);
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(QuantFormat::Q6_K, 4, 256), doctest::Contains("not kept quantized"),
                         luminal::Error);
}

TEST_CASE("the CPU thread pool covers each index once, in parts that do not depend on the threads") {
    for (std::size_t threads : {1, 2, 5}) {
        luminal::cpu::ThreadPool pool(threads);
        CHECK(pool.size() == threads);
        for (std::int64_t n : {0, 1, 7, 100, 1000}) {
            CAPTURE(threads);
            CAPTURE(n);
            std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
            std::vector<std::int64_t> starts;
            std::mutex starts_mutex;
            pool.parallel_for(n, 8, [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
                std::lock_guard lock(starts_mutex);
                starts.push_back(begin);
            });
            CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h == 1; }));
            CHECK(starts.size() <= static_cast<std::size_t>(pool.max_parts()));
        }
        CHECK_THROWS_WITH_AS(pool.parallel_for(1000, 1, [](std::int64_t, std::int64_t end) {
                                 if (end == 1000) throw std::runtime_error("part failed");  // the last part
                             }),
                             "part failed", std::runtime_error);
    }
}

TEST_CASE("CpuRuntime: threads and instruction set as asked; one this CPU lacks is an Error") {
    CHECK(luminal::CpuRuntime(luminal::CpuOptions{3, Isa::Scalar}).threads() == 3);
    CHECK(luminal::CpuRuntime{}.threads() >= 1);
    if (!luminal::cpu::quant::supports(Isa::Avx512Vnni))
        CHECK_THROWS_WITH_AS(luminal::CpuRuntime(luminal::CpuOptions{1, Isa::Avx512Vnni}),
                             doctest::Contains("cannot run the avx512vnni kernels"), luminal::Error);
}

// Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 blocks; Q4_K, Q6_K super-blocks) on the CPU: products and
// lookups through Dequantize, rewritten to QuantizedMatmul / QuantizedGather,
// against tools/gen_quantized_fixtures.py (the gguf package's quantizer and
// dequantizer, products in float64), on every instruction set this CPU runs
// and at several thread counts; the ReferenceRuntime on the same graphs; the
// thread pool; and the errors for blocks that do not fit.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <luminal/luminal.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using luminal::QuantFormat;
using luminal::cpu::quant::Isa;

const std::filesystem::path kQuantizedData = luminal_test::data_dir() / "quantized";
constexpr std::int64_t kRows = 40, kActivationRows = 13;
constexpr QuantFormat kFormats[] = {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q5_0,
                                    QuantFormat::Q5_1, QuantFormat::Q4_K, QuantFormat::Q6_K};

// The fixture's weights are [40, 96], or [40, 512] for the formats of 256-element super-blocks.
std::int64_t cols_of(QuantFormat f) { return luminal::block_elements(f) == 256 ? 512 : 96; }
std::string activations_of(QuantFormat f) { return cols_of(f) == 512 ? "x256" : "x"; }
std::string fixture_name(QuantFormat f, std::string_view what) {
    return std::string(luminal::io::name_of(f)) + "." + std::string(what);
}

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

// y = x [m, cols] · dequantize(blocks)^T, with the blocks of a [40, cols] weight.
struct QuantizedProduct {
    std::unique_ptr<luminal::Graph> cx;  // on the heap: the tensors point at it
    luminal::GraphTensor x, blocks, y;
};

QuantizedProduct quantized_product(QuantFormat f, std::int64_t m, bool q8_activations) {
    auto cx = std::make_unique<luminal::Graph>();
    const std::int64_t cols = cols_of(f);
    auto x = cx->tensor({m, cols});
    auto blocks = cx->named_tensor("blocks", {luminal::quantized_bytes(f, kRows, cols)}, luminal::DType::U8);
    const auto w = luminal::custom_op(luminal::DequantizeOp{f, kRows, cols, q8_activations}, {blocks});
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
    rt.set_data(p.x, first_rows(quant_fixture().values(activations_of(f)), m, cols_of(f)));
    rt.set_bytes(p.blocks, quant_fixture().blocks(f));
    rt.execute(p.cx->dyn_map());
    return rt.get_f32(p.y);
}

// Rows `picked` of the fixture's table as the gguf package dequantizes it.
std::vector<float> dequantized_rows(QuantFormat f, const std::vector<std::int32_t>& picked) {
    const auto table = quant_fixture().values(fixture_name(f, "dequantized"));
    const std::int64_t cols = cols_of(f);
    std::vector<float> out;
    for (std::int32_t id : picked) out.insert(out.end(), table.begin() + id * cols, table.begin() + (id + 1) * cols);
    return out;
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
    for (QuantFormat f : kFormats)
        for (std::int64_t m : {std::int64_t{1}, std::int64_t{5}, kActivationRows})  // one row, the direct path, the panel path
            for (bool q8 : {false, true})
                for (Isa isa : isas)
                    for (std::size_t threads : {1, 3}) {
                        CAPTURE(luminal::io::name_of(f));
                        CAPTURE(m);
                        CAPTURE(q8);
                        CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
                        CAPTURE(threads);
                        QuantizedProduct p = quantized_product(f, m, q8);
                        std::string program;
                        const auto got = run_product(p, luminal::CpuRuntime(luminal::CpuOptions{threads, isa}), f, m, &program);
                        CHECK(program.find("QuantizedMatmul") != std::string::npos);
                        CHECK(program.find("Dequantize") == std::string::npos);
                        check_close(got, first_rows(quant_fixture().values(fixture_name(f, q8 ? "q8" : "f32")), m, kRows));
                    }
}

TEST_CASE("8-bit activations are an approximation the fixture can tell apart from f32 ones") {
    // Guards the test above: were both kinds computed alike, one of its checks would fail.
    for (QuantFormat f : kFormats) {
        const auto exact = quant_fixture().values(fixture_name(f, "f32")), rounded = quant_fixture().values(fixture_name(f, "q8"));
        double worst = 0;
        for (std::size_t i = 0; i < exact.size(); ++i)
            worst = std::max(worst, std::abs(double(exact[i]) - double(rounded[i])) / (1 + std::abs(double(exact[i]))));
        CHECK(worst > 1e-3);
    }
}

TEST_CASE("the ReferenceRuntime runs the quantized graph as written: dequantize, then multiply") {
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        QuantizedProduct p = quantized_product(f, 5, true);
        check_close(run_product(p, luminal::ReferenceRuntime{}, f, 5),
                    first_rows(quant_fixture().values(fixture_name(f, "f32")), 5, kRows), 1e-6);
    }
}

TEST_CASE("QuantizedMatmul's reference semantics round activations as the Q8 kernels do") {
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        luminal::Graph cx;
        const std::int64_t cols = cols_of(f);
        auto x = cx.tensor({kActivationRows, cols});
        auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows, cols)}, luminal::DType::U8);
        auto y = luminal::custom_op(luminal::QuantizedMatmulOp{f, kRows, cols, luminal::Activations::Q8, luminal::WeightLayout::Blocks}, {x, blocks}).output();
        luminal::CompileOptions options;
        options.verbosity = 0;
        auto rt = cx.compile(luminal::ReferenceRuntime{}, options);
        rt.set_data(x, quant_fixture().values(activations_of(f)));
        rt.set_bytes(blocks, quant_fixture().blocks(f));
        rt.execute(cx.dyn_map());
        check_close(rt.get_f32(y), quant_fixture().values(fixture_name(f, "q8")), 1e-6);
    }
}

TEST_CASE("an embedding lookup in a quantized table decodes only the rows it reads") {
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        luminal::Graph cx;
        const std::int64_t cols = cols_of(f);
        auto ids = cx.tensor({4}, luminal::DType::I32);
        auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows, cols)}, luminal::DType::U8);
        auto table = luminal::custom_op(luminal::DequantizeOp{f, kRows, cols, true}, {blocks});
        auto rows = table.index_select(0, ids).output();
        luminal::CompileOptions options;
        options.verbosity = 0;
        auto [rt, report] = luminal::compile_with_report(cx, luminal::CpuRuntime{}, options);
        CHECK(report.program.to_string().find("QuantizedGather") != std::string::npos);
        const std::vector<std::int32_t> picked{7, 0, 39, 7};
        rt.set_data(ids, picked);
        rt.set_bytes(blocks, quant_fixture().blocks(f));
        rt.execute(cx.dyn_map());
        const std::vector<float> want = dequantized_rows(f, picked);
        CHECK(rt.get_f32(rows) == want);  // decoding is exact

        rt.set_data(ids, std::vector<std::int32_t>{0, 1, 40, 2});
        CHECK_THROWS_WITH_AS(rt.execute(cx.dyn_map()), doctest::Contains("outside the"), luminal::Error);
    }
}

TEST_CASE("blocks that do not fit the weight are an Error naming sizes, not a crash") {
    luminal::CompileOptions options;
    options.verbosity = 0;
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        const std::int64_t cols = cols_of(f);
        luminal::Graph cx;
        auto x = cx.tensor({1, cols});
        // The input holds one row of blocks less than a [40, cols] matrix needs: truncated block data.
        const std::int64_t have = luminal::quantized_bytes(f, kRows - 1, cols), want = luminal::quantized_bytes(f, kRows, cols);
        auto blocks = cx.named_tensor("blocks", {have}, luminal::DType::U8);
        auto y = x.matmul(luminal::custom_op(luminal::DequantizeOp{f, kRows, cols, true}, {blocks}).t()).output();
        for (bool cpu : {true, false}) {
            CAPTURE(cpu);
            auto check_run = [&](auto rt) {
                rt.set_data(x, first_rows(quant_fixture().values(activations_of(f)), 1, cols));
                rt.set_bytes(blocks, quant_fixture().blocks(f).first(static_cast<std::size_t>(have)));
                const std::string message = "is " + std::to_string(want) + " bytes of blocks, the input has " +
                                            std::to_string(have);
                CHECK_THROWS_WITH_AS(rt.execute(cx.dyn_map()), doctest::Contains(message.c_str()), luminal::Error);
            };
            if (cpu) check_run(cx.compile(luminal::CpuRuntime{}, options));
            else check_run(cx.compile(luminal::ReferenceRuntime{}, options));
        }
    }
    CHECK(luminal::quantized_bytes(QuantFormat::Q4_1, 4, 96) == 4 * 3 * 20);
    CHECK(luminal::quantized_bytes(QuantFormat::Q4_K, 4, 512) == 4 * 2 * 144);
    CHECK(luminal::quantized_bytes(QuantFormat::Q6_K, 4, 512) == 4 * 2 * 210);
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(QuantFormat::Q4_1, 4, 100), doctest::Contains("whole blocks of 32"),
                         luminal::Error);
    // A row of 96 is whole blocks of 32 but not of a K super-block.
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(QuantFormat::Q4_K, 4, 96), doctest::Contains("whole blocks of 256"),
                         luminal::Error);
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(QuantFormat::Q6_K, 4, 288), doctest::Contains("whole blocks of 256"),
                         luminal::Error);
    CHECK_THROWS_WITH_AS(luminal::quantized_bytes(QuantFormat::Q5_K, 4, 256),
                         doctest::Contains("Q5_K is not kept quantized (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K are)"),
                         luminal::Error);
}

TEST_CASE("every instruction set computes what the scalar kernels compute") {
    // Half the fixture's tolerance: the integer block sums are exact on every path, so only
    // the order of the f32 sums (up to 512 terms) differs. 7 rows take the 4-, 2- and 1-row tiles.
    const std::vector<Isa> isas = isas_here();
    for (QuantFormat f : kFormats)
        for (bool q8 : {false, true})
            for (std::int64_t m : {std::int64_t{1}, std::int64_t{7}, kActivationRows}) {
                CAPTURE(luminal::io::name_of(f));
                CAPTURE(q8);
                CAPTURE(m);
                QuantizedProduct scalar_product = quantized_product(f, m, q8);
                const auto scalar = run_product(scalar_product, luminal::CpuRuntime(luminal::CpuOptions{1, Isa::Scalar}), f, m);
                for (Isa isa : isas) {
                    CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
                    QuantizedProduct p = quantized_product(f, m, q8);
                    check_close(run_product(p, luminal::CpuRuntime(luminal::CpuOptions{2, isa}), f, m), scalar, 1e-5);
                }
            }
}

TEST_CASE("Dequantize on the CPU decodes the blocks bit for bit as the gguf package does") {
    for (QuantFormat f : kFormats)
        for (Isa isa : isas_here()) {
            CAPTURE(luminal::io::name_of(f));
            CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
            const std::int64_t cols = cols_of(f);
            luminal::Graph cx;
            auto blocks = cx.named_tensor("blocks", {luminal::quantized_bytes(f, kRows, cols)}, luminal::DType::U8);
            auto w = luminal::custom_op(luminal::DequantizeOp{f, kRows, cols, true}, {blocks}).output();
            luminal::CompileOptions options;
            options.verbosity = 0;
            auto rt = cx.compile(luminal::CpuRuntime(luminal::CpuOptions{2, isa}), options);
            rt.set_bytes(blocks, quant_fixture().blocks(f));
            rt.execute(cx.dyn_map());
            const auto want = quant_fixture().values(fixture_name(f, "dequantized"));
            // Q4_1's and Q5_1's AVX2 decoders fuse d * n + m into one FMA: the last bit may differ there.
            const bool fused = f == QuantFormat::Q4_1 || f == QuantFormat::Q5_1;
            if (fused && isa != Isa::Scalar) check_close(rt.get_f32(w), want, 1e-7);
            else CHECK(rt.get_f32(w) == want);
        }
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

TEST_CASE("LUMINAL_MAX_CPU_ISA caps the instruction set CpuRuntime picks; an unknown name is an Error") {
    namespace q = luminal::cpu::quant;
    const Isa uncapped = q::supports(Isa::Avx512Vnni) ? Isa::Avx512Vnni
                         : q::supports(Isa::Avx2)     ? Isa::Avx2
                                                      : Isa::Scalar;
    ::unsetenv("LUMINAL_MAX_CPU_ISA");
    CHECK(q::best_isa() == uncapped);
    ::setenv("LUMINAL_MAX_CPU_ISA", "scalar", 1);
    CHECK(luminal::CpuRuntime{}.isa() == Isa::Scalar);
    ::setenv("LUMINAL_MAX_CPU_ISA", "avx2", 1);
    CHECK(q::best_isa() == (q::supports(Isa::Avx2) ? Isa::Avx2 : Isa::Scalar));
    ::setenv("LUMINAL_MAX_CPU_ISA", "avx512vnni", 1);
    CHECK(q::best_isa() == uncapped);
    ::setenv("LUMINAL_MAX_CPU_ISA", "avx1024", 1);
    CHECK_THROWS_WITH_AS(q::best_isa(), doctest::Contains("unknown instruction set 'avx1024'"), luminal::Error);
    ::unsetenv("LUMINAL_MAX_CPU_ISA");
}

namespace {

// Random blocks of a 32-element format: scales in [0.01, 0.1) (Q4_1's and Q5_1's
// minimums in [-0.1, 0.1)), every quant and fifth bit random.
template <QuantFormat F>
std::vector<std::byte> random_long_blocks(std::int64_t rows, std::int64_t blocks, std::mt19937& rng) {
    namespace q = luminal::cpu::quant;
    std::vector<std::byte> out(static_cast<std::size_t>(rows * blocks * q::block_bytes<F>));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.01f, 0.1f), minimum(-0.1f, 0.1f);
    auto put_f16 = [](std::byte* p, float v) {
        const std::uint16_t bits = luminal::f32_to_f16_bits(v);
        std::memcpy(p, &bits, sizeof bits);
    };
    for (std::int64_t b = 0; b < rows * blocks; ++b) {
        std::byte* block = out.data() + b * q::block_bytes<F>;
        for (std::int64_t i = 0; i < q::block_bytes<F>; ++i) block[i] = static_cast<std::byte>(byte(rng));
        put_f16(block, scale(rng));
        if constexpr (q::has_offset<F>) put_f16(block + 2, minimum(rng));
    }
    return out;
}

template <QuantFormat F>
void check_long_rows(Isa isa) {
    namespace q = luminal::cpu::quant;
    constexpr std::int64_t rows = 6, blocks = 19, k = blocks * 32;  // two groups of 8 blocks, then 3 alone
    std::mt19937 rng(7);
    const std::vector<std::byte> w = random_long_blocks<F>(rows, blocks, rng);
    std::vector<float> a(static_cast<std::size_t>(5 * k));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : a) v = u(rng);
    for (std::int64_t m : {1, 5}) {
        CAPTURE(m);
        q::Q8Rows x;
        q::size_rows(m, k, x);
        q::quantize_rows(a.data(), k, k, 0, m, x);
        std::vector<float> got(static_cast<std::size_t>(m * rows));
        q::q8_product<F>(isa, q::ProductTask{w.data(), blocks * q::block_bytes<F>, k, 0, rows, got.data(), rows}, x);
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < rows; ++j) {
                double want = 0, scale = 0;
                for (std::int64_t b = 0; b < blocks; ++b) {
                    float decoded[32];
                    q::decode_block<F>(w.data() + (j * blocks + b) * q::block_bytes<F>, decoded);
                    const std::int8_t* quants = x.quants(i, b);
                    for (int e = 0; e < 32; ++e) {
                        const double term = double(decoded[e]) * x.scale[i * blocks + b] * quants[e];
                        want += term;
                        scale += std::fabs(term);
                    }
                }
                INFO("row " << i << ", output " << j);
                CHECK(std::fabs(got[static_cast<std::size_t>(i * rows + j)] - want) <= 1e-5 * scale);
            }
    }
}

}  // namespace

TEST_CASE("Q8 block products of rows longer than a group of 8 blocks match float64 sums of the decoded blocks") {
    for (Isa isa : isas_here()) {
        CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
        check_long_rows<QuantFormat::Q8_0>(isa);
        check_long_rows<QuantFormat::Q4_0>(isa);
        check_long_rows<QuantFormat::Q4_1>(isa);
        check_long_rows<QuantFormat::Q5_0>(isa);
        check_long_rows<QuantFormat::Q5_1>(isa);
    }
}

namespace {

// y = QuantizedMatmul(x, blocks) with Q8 activations in `layout`, built directly
// (compiling Matmul(x, Dequantize) would let the cost model pick the layout), of the
// fixture's first `rows` weight rows (blocks are stored row after row).
QuantizedProduct layout_product(QuantFormat f, std::int64_t m, luminal::WeightLayout layout, std::int64_t rows = kRows) {
    auto cx = std::make_unique<luminal::Graph>();
    const std::int64_t cols = cols_of(f);
    auto x = cx->tensor({m, cols});
    auto blocks = cx->named_tensor("blocks", {luminal::quantized_bytes(f, rows, cols)}, luminal::DType::U8);
    auto y = luminal::custom_op(luminal::QuantizedMatmulOp{f, rows, cols, luminal::Activations::Q8, layout}, {x, blocks})
                 .output();
    return {std::move(cx), x, blocks, y};
}

// The fixture's product with Q8 activations: m rows, the first `rows` columns.
std::vector<float> q8_product_fixture(QuantFormat f, std::int64_t m, std::int64_t rows) {
    const auto all = quant_fixture().values(fixture_name(f, "q8"));
    std::vector<float> out;
    for (std::int64_t i = 0; i < m; ++i) out.insert(out.end(), all.begin() + i * kRows, all.begin() + i * kRows + rows);
    return out;
}

}  // namespace

TEST_CASE("products of weights repacked with 8 rows interleaved match the gguf package's, as the block kernels do") {
    // Every format and layout on every instruction set and thread count, 1 to 13 activation
    // rows (the 4-, 2- and 1-row tiles), 40 weight rows and 37 (four groups of 8, then 5
    // rows as blocks), against the fixture's float64 products of the gguf package's
    // dequantized weights and rounded activations. Rows are 96 long (three blocks, not a
    // multiple of 256) or, for Q4_K and Q6_K, 512 (two super-blocks).
    for (QuantFormat f : kFormats)
        for (std::int64_t rows : {kRows, std::int64_t{37}})
            for (luminal::WeightLayout layout : {luminal::WeightLayout::Blocks, luminal::WeightLayout::Interleaved8})
                for (std::int64_t m : {std::int64_t{1}, std::int64_t{7}, kActivationRows})
                    for (Isa isa : isas_here())
                        for (std::size_t threads : {1, 3}) {
                            CAPTURE(luminal::io::name_of(f));
                            CAPTURE(rows);
                            CAPTURE(static_cast<int>(layout));
                            CAPTURE(m);
                            CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
                            CAPTURE(threads);
                            QuantizedProduct p = layout_product(f, m, layout, rows);
                            std::string program;
                            luminal::CompileOptions options;
                            options.verbosity = 0;
                            auto [rt, report] = luminal::compile_with_report(
                                *p.cx, luminal::CpuRuntime(luminal::CpuOptions{threads, isa}), options);
                            CHECK((report.program.to_string().find("interleaved8") != std::string::npos) ==
                                  (layout == luminal::WeightLayout::Interleaved8));
                            rt.set_data(p.x, first_rows(quant_fixture().values(activations_of(f)), m, cols_of(f)));
                            rt.set_bytes(p.blocks, quant_fixture().blocks(f).first(
                                                       static_cast<std::size_t>(luminal::quantized_bytes(f, rows, cols_of(f)))));
                            rt.execute(p.cx->dyn_map());
                            check_close(rt.get_f32(p.y), q8_product_fixture(f, m, rows));
                        }
}

namespace {

// 8 rows of blocks at their largest quants (every quant bit set; Q8_0's -127)
// with scale 1 (Q4_1's and Q5_1's offsets, Q4_K's dmin 1 too), times activations
// of one sign and magnitude, which round to 127 everywhere: the AVX2 kernels'
// 16-bit partial sums at their bound.
template <QuantFormat F>
void check_largest_quants(Isa isa) {
    namespace q = luminal::cpu::quant;
    constexpr std::int64_t rows = q::kInterleave, per_row = 2;
    constexpr std::int64_t k = per_row * q::block_elements<F>, row_bytes = per_row * q::block_bytes<F>;
    std::vector<std::byte> blocks(static_cast<std::size_t>(rows * row_bytes), std::byte{0xFF});
    const std::uint16_t one = luminal::f32_to_f16_bits(1.0f);
    for (std::int64_t b = 0; b < rows * per_row; ++b) {
        std::byte* block = blocks.data() + b * q::block_bytes<F>;
        if constexpr (F == QuantFormat::Q8_0) std::memset(block + 2, 0x81, 32);
        const std::int64_t d_at = F == QuantFormat::Q6_K ? q::block_bytes<F> - 2 : 0;
        std::memcpy(block + d_at, &one, 2);
        if constexpr (q::has_offset<F> || F == QuantFormat::Q4_K) std::memcpy(block + 2, &one, 2);
    }
    std::vector<std::byte> repacked(blocks.size());
    q::interleave_groups<F>(blocks.data(), k, 0, 1, repacked.data());
    const std::vector<float> a(static_cast<std::size_t>(k), 0.5f);
    q::Q8Rows x;
    q::size_rows(1, k, x);
    q::quantize_rows(a.data(), k, k, 0, 1, x);
    if constexpr (F == QuantFormat::Q6_K) q::sum_halves(x);
    std::vector<float> got(rows);
    q::interleaved_q8_product<F>(isa, q::ProductTask{repacked.data(), row_bytes, k, 0, rows, got.data(), rows}, x);
    for (std::int64_t j = 0; j < rows; ++j) {
        double want = 0, scale = 0;
        for (std::int64_t b = 0; b < x.blocks; ++b) {
            float decoded[256];
            const std::int64_t per_block = q::block_elements<F> / luminal::kQuantBlock;
            q::decode_block<F>(blocks.data() + j * row_bytes + (b / per_block) * q::block_bytes<F>, decoded);
            for (std::int64_t e = 0; e < luminal::kQuantBlock; ++e) {
                CHECK(x.quants(0, b)[e] == 127);
                const double term =
                    double(decoded[(b % per_block) * luminal::kQuantBlock + e]) * x.scale[b] * x.quants(0, b)[e];
                want += term;
                scale += std::fabs(term);
            }
        }
        INFO("output " << j);
        CHECK(std::fabs(got[static_cast<std::size_t>(j)] - want) <= 1e-5 * scale);
    }
}

}  // namespace

TEST_CASE("interleaved products at the largest quants and activations do not overflow on any instruction set") {
    for (Isa isa : isas_here()) {
        CAPTURE(std::string(luminal::cpu::quant::name_of(isa)));
        check_largest_quants<QuantFormat::Q8_0>(isa);
        check_largest_quants<QuantFormat::Q4_0>(isa);
        check_largest_quants<QuantFormat::Q4_1>(isa);
        check_largest_quants<QuantFormat::Q5_0>(isa);
        check_largest_quants<QuantFormat::Q5_1>(isa);
        check_largest_quants<QuantFormat::Q4_K>(isa);
        check_largest_quants<QuantFormat::Q6_K>(isa);
    }
}

TEST_CASE("the cost model picks interleaved rows for 8-bit products of every format") {
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        QuantizedProduct p = quantized_product(f, 5, true);
        std::string program;
        run_product(p, luminal::CpuRuntime{}, f, 5, &program);
        CHECK(program.find("interleaved8") != std::string::npos);
    }
}

TEST_CASE("a table read by an interleaved product and a lookup: the lookup decodes the repacked copy exactly") {
    // 40 rows, and 37 (rows 32..36 after the last whole group stay as blocks).
    for (QuantFormat f : kFormats)
        for (std::int64_t rows : {kRows, std::int64_t{37}}) {
            CAPTURE(luminal::io::name_of(f));
            CAPTURE(rows);
            luminal::Graph cx;
            const std::int64_t cols = cols_of(f), bytes = luminal::quantized_bytes(f, rows, cols);
            auto ids = cx.tensor({4}, luminal::DType::I32);
            auto x = cx.tensor({3, cols});
            auto blocks = cx.named_tensor("blocks", {bytes}, luminal::DType::U8);
            luminal::GraphTensor table = luminal::custom_op(luminal::DequantizeOp{f, rows, cols, true}, {blocks});
            auto looked_up = table.index_select(0, ids).output();
            auto y = x.matmul(table.t()).output();
            luminal::CompileOptions options;
            options.verbosity = 0;
            auto [rt, report] = luminal::compile_with_report(cx, luminal::CpuRuntime{}, options);
            const std::string program = report.program.to_string();
            CHECK(program.find("interleaved8") != std::string::npos);
            CHECK(program.find("QuantizedGather") != std::string::npos);
            const std::vector<std::int32_t> picked{7, 0, static_cast<std::int32_t>(rows - 1), 33};
            rt.set_data(ids, picked);
            rt.set_data(x, first_rows(quant_fixture().values(activations_of(f)), 3, cols));
            rt.set_bytes(blocks, quant_fixture().blocks(f).first(static_cast<std::size_t>(bytes)));
            rt.execute(cx.dyn_map());
            const std::vector<float> want = dequantized_rows(f, picked);
            CHECK(rt.get_f32(looked_up) == want);
            check_close(rt.get_f32(y), q8_product_fixture(f, 3, rows));
        }
}

TEST_CASE("pack_tile and unpack_tile are inverse, and the repacked tile is not the file's bytes") {
    namespace q = luminal::cpu::quant;
    std::mt19937 rng(11);
    auto check_format = [&]<QuantFormat F>() {
        CAPTURE(luminal::io::name_of(F));
        const std::vector<std::byte> blocks = random_long_blocks<F>(8, 1, rng);
        std::vector<std::byte> tile(blocks.size()), back(blocks.size());
        q::pack_tile<F>(blocks.data(), tile.data());
        q::unpack_tile<F>(tile.data(), back.data());
        CHECK(back == blocks);
        CHECK(tile != blocks);
        // Row 3's scale is the tile's fourth f16; its first quant bytes start vector 0's lane 3.
        constexpr bool q6_k = F == QuantFormat::Q6_K;
        const std::byte* row3 = blocks.data() + 3 * q::block_bytes<F>;
        CHECK(std::memcmp(tile.data() + 6, row3 + (q6_k ? 208 : 0), 2) == 0);
        const std::int64_t tile_quants = F == QuantFormat::Q4_K ? q::k_tile::q4_quants
                                         : q6_k                 ? q::k_tile::q6_low
                                                                : q::tile_quants_offset<F>;
        const std::int64_t row_quants = F == QuantFormat::Q4_K ? 16 : q6_k ? 0 : q::quants_offset<F>;
        CHECK(std::memcmp(tile.data() + tile_quants + 12, row3 + row_quants, 4) == 0);
    };
    check_format.operator()<QuantFormat::Q8_0>();
    check_format.operator()<QuantFormat::Q4_0>();
    check_format.operator()<QuantFormat::Q4_1>();
    check_format.operator()<QuantFormat::Q5_0>();
    check_format.operator()<QuantFormat::Q5_1>();
    check_format.operator()<QuantFormat::Q4_K>();
    check_format.operator()<QuantFormat::Q6_K>();
}

TEST_CASE("a repacked weight whose copy was freed is restored for a program kept from another (as the search does)") {
    // set_bytes copies the blocks; once repacked for the interleaved product nothing reads
    // the copy, which is freed. A program then loaded with InputBinding::Keep that reads the
    // blocks as stored gets them back, decoded from the repacked copy.
    for (QuantFormat f : kFormats) {
        CAPTURE(luminal::io::name_of(f));
        QuantizedProduct interleaved = layout_product(f, 3, luminal::WeightLayout::Interleaved8);
        QuantizedProduct blocks = layout_product(f, 3, luminal::WeightLayout::Blocks);
        luminal::CompileOptions options;
        options.verbosity = 0;
        auto [rt, report] = luminal::compile_with_report(*interleaved.cx, luminal::CpuRuntime{}, options);
        const auto want = first_rows(quant_fixture().values(fixture_name(f, "q8")), 3, kRows);
        rt.set_data(interleaved.x, first_rows(quant_fixture().values(activations_of(f)), 3, cols_of(f)));
        rt.set_bytes(interleaved.blocks, quant_fixture().blocks(f));
        rt.execute(interleaved.cx->dyn_map());
        check_close(rt.get_f32(interleaved.y), want);
        const auto blocks_program = luminal::compile_with_report(*blocks.cx, luminal::CpuRuntime{}, options).second.program;
        CHECK(blocks_program.to_string().find("interleaved8") == std::string::npos);
        rt.load(blocks_program, luminal::InputBinding::Keep);
        rt.execute(blocks.cx->dyn_map());
        check_close(rt.get_f32(blocks.y), want);
    }
}

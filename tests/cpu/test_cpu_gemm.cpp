// The GEMM that reads B's rows in place (gemm.hpp), f32 and 16-bit, on every
// instruction set this CPU runs (bf16 pairs where it has AVX512_BF16),
// against a float64 triple loop over the same values: shapes with partial
// panels and tiles, depths past one block of q, row strides that take the
// copied-tile path, a transposed A, and a thread pool (whose results must
// equal the single-threaded ones bit for bit).
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#ifdef LUMINAL_QUANT_X86

namespace {

using luminal::cpu::quant::Isa;

struct GemmCase {
    std::int64_t m, k, n;
    bool transposed_a;  // A stored [k, m]: column stride 1 is false
    std::int64_t b_padding;  // B's row stride is k + this
};

std::vector<float> gemm_random(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// Runs product(out, pool) once alone and once on `pool`, and checks the result
// against the float64 product of A (values a, strides rs and cs) and B's rows
// (values b, row stride ldb), and the two runs against each other bit for bit.
template <typename Product>
void check_product(const GemmCase& c, const std::vector<float>& a, const std::vector<float>& b, luminal::cpu::ThreadPool* pool,
                   const Product& product) {
    CAPTURE(c.m);
    CAPTURE(c.k);
    CAPTURE(c.n);
    CAPTURE(c.transposed_a);
    CAPTURE(c.b_padding);
    const std::int64_t ldb = c.k + c.b_padding, rs = c.transposed_a ? 1 : c.k, cs = c.transposed_a ? c.m : 1;
    std::vector<float> got(static_cast<std::size_t>(c.m * c.n), NAN), single(got.size(), NAN);
    product(single.data(), nullptr);
    product(got.data(), pool);
    for (std::int64_t i = 0; i < c.m; ++i)
        for (std::int64_t j = 0; j < c.n; ++j) {
            double want = 0, scale = 0;
            for (std::int64_t q = 0; q < c.k; ++q) {
                const double x = a[static_cast<std::size_t>(i * rs + q * cs)], w = b[static_cast<std::size_t>(j * ldb + q)];
                want += x * w;
                scale += std::fabs(x * w);
            }
            const float value = got[static_cast<std::size_t>(i * c.n + j)];
            INFO("out[" << i << ", " << j << "] = " << value << ", want " << want);
            REQUIRE(std::fabs(value - want) <= 1e-5 * scale + 1e-7);
            REQUIRE(value == single[static_cast<std::size_t>(i * c.n + j)]);
        }
}

void check_gemm_case(Isa isa, const GemmCase& c, luminal::cpu::ThreadPool* pool) {
    CAPTURE(luminal::cpu::quant::name_of(isa));
    const std::int64_t ldb = c.k + c.b_padding, rs = c.transposed_a ? 1 : c.k, cs = c.transposed_a ? c.m : 1;
    const std::vector<float> a = gemm_random(static_cast<std::size_t>(c.m * c.k), 1);
    const std::vector<float> b = gemm_random(static_cast<std::size_t>(c.n * ldb), 2);
    REQUIRE(luminal::cpu::gemm_detail::applies(isa, c.m, c.k, 1));
    luminal::cpu::gemm_detail::GemmScratch scratch;
    check_product(c, a, b, pool, [&](float* out, luminal::cpu::ThreadPool* on) {
        luminal::cpu::gemm_detail::rowwise_gemm(isa, a.data(), c.m, c.k, rs, cs, b.data(), c.n, ldb, out, c.n, scratch, on);
    });
}

}  // namespace

TEST_CASE("the in-place f32 GEMM matches a float64 product on every instruction set") {
    const GemmCase cases[] = {
        {2, 3, 1, false, 0},      // the fewest rows it takes; one column
        {7, 64, 5, false, 3},     // a partial panel and a partial tile, padded B rows
        {16, 96, 16, false, 0},   // whole panels and tiles (AVX-512)
        {17, 769, 33, false, 0},  // depth past one block of q; partial everything
        {45, 1024, 40, false, 0}, // B rows 4 KiB apart: the copied-tile path
        {24, 50, 27, true, 0},    // A transposed
        {130, 1600, 70, false, 512},  // three blocks of q, a 2 KiB-multiple stride
    };
    luminal::cpu::ThreadPool pool(3);
    for (Isa isa : {Isa::Avx2, Isa::Avx512Vnni}) {
        if (!luminal::cpu::quant::supports(isa)) continue;
        for (const GemmCase& c : cases) check_gemm_case(isa, c, &pool);
    }
}

namespace {

// bf16 or f16 bits of v's values, and those values back in f32.
std::vector<std::uint16_t> narrowed(const std::vector<float>& v, luminal::DType dtype, std::vector<float>& values) {
    std::vector<std::uint16_t> bits(v.size());
    values.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        bits[i] = dtype == luminal::DType::BF16 ? luminal::f32_to_bf16_bits(v[i]) : luminal::f32_to_f16_bits(v[i]);
        values[i] = dtype == luminal::DType::BF16 ? luminal::bf16_bits_to_f32(bits[i]) : luminal::f16_bits_to_f32(bits[i]);
    }
    return bits;
}

void check_narrow_case(Isa isa, luminal::DType b_dtype, bool a_is_bf16, const GemmCase& c, luminal::cpu::ThreadPool* pool) {
    CAPTURE(luminal::cpu::quant::name_of(isa));
    CAPTURE(luminal::name_of(b_dtype));
    CAPTURE(a_is_bf16);
    const std::int64_t ldb = c.k + c.b_padding, rs = c.transposed_a ? 1 : c.k, cs = c.transposed_a ? c.m : 1;
    std::vector<float> a = gemm_random(static_cast<std::size_t>(c.m * c.k), 3), b;
    if (a_is_bf16) narrowed(std::vector<float>(a), luminal::DType::BF16, a);
    const std::vector<std::uint16_t> b_bits = narrowed(gemm_random(static_cast<std::size_t>(c.n * ldb), 4), b_dtype, b);
    luminal::cpu::gemm_detail::GemmScratch scratch;
    check_product(c, a, b, pool, [&](float* out, luminal::cpu::ThreadPool* on) {
        luminal::cpu::gemm_detail::narrow_rowwise_gemm(isa, b_dtype, a_is_bf16, a.data(), c.m, c.k, rs, cs, b_bits.data(), c.n, ldb,
                                                       out, c.n, scratch, on);
    });
}

}  // namespace

TEST_CASE("the GEMM of 16-bit B read as stored matches a float64 product: widened tiles and bf16 pairs") {
    const GemmCase cases[] = {
        {9, 64, 5, false, 0},        // a partial panel and tile
        {17, 770, 33, false, 6},     // depth past one block of q, padded B rows
        {33, 2048, 48, false, 0},    // a model's stride (4 KiB of bf16)
        {24, 50, 27, true, 0},       // A transposed
        {12, 31, 17, false, 1},      // odd depth: the bf16 pairs do not apply, widened instead
    };
    luminal::cpu::ThreadPool pool(3);
    for (Isa isa : {Isa::Avx2, Isa::Avx512Vnni}) {
        if (!luminal::cpu::quant::supports(isa)) continue;
        for (const GemmCase& c : cases) {
            check_narrow_case(isa, luminal::DType::F16, false, c, &pool);
            check_narrow_case(isa, luminal::DType::BF16, false, c, &pool);
            check_narrow_case(isa, luminal::DType::BF16, true, c, &pool);
        }
    }
    MESSAGE("bf16 pairs on this CPU: " << luminal::cpu::quant::supports_bf16_dot(Isa::Avx512Vnni));
}

TEST_CASE("the in-place f32 GEMM is not taken for one row, strided B columns, or the scalar kernels") {
    CHECK_FALSE(luminal::cpu::gemm_detail::applies(Isa::Avx2, 1, 64, 1));
    CHECK_FALSE(luminal::cpu::gemm_detail::applies(Isa::Avx2, 8, 64, 4));
    CHECK_FALSE(luminal::cpu::gemm_detail::applies(Isa::Scalar, 8, 64, 1));
    CHECK_FALSE(luminal::cpu::gemm_detail::applies(Isa::Avx2, 8, 0, 1));
}

#endif

// The products of a few rows of A with a B read in place (cpu/few_rows.hpp),
// B in f32, f16 and bf16, both layouts, on every instruction set this CPU
// runs and at 1 and 3 threads, against a float64 triple loop. B's values are
// multiples of 1/64 below 2 in magnitude, exact in all three dtypes, and their
// 16-bit encodings are written out here (sign, exponent, mantissa), so the
// reference does not go through the library's conversions.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace few_rows_test {

using luminal::DType;
using luminal::cpu::quant::Isa;
namespace few = luminal::cpu::few_rows;

// v = n / 64 for |n| < 128 as IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
std::uint16_t half_bits(int n) {
    if (n == 0) return 0;
    const std::uint16_t sign = n < 0 ? 0x8000 : 0;
    int magnitude = n < 0 ? -n : n, exponent = -6;  // n / 64 = magnitude * 2^-6
    while (magnitude < 1 << 10) magnitude <<= 1, --exponent;    // normalise to 1.x * 2^(exponent + 10)
    return static_cast<std::uint16_t>(sign | (exponent + 10 + 15) << 10 | (magnitude & 0x3FF));
}

// bf16 is the high half of the f32 bits; n / 64 has at most 7 significant bits, so the low half is zero.
std::uint16_t bf16_bits(int n) {
    const float v = static_cast<float>(n) / 64.0f;
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return static_cast<std::uint16_t>(bits >> 16);
}

struct FewRowsCase {
    std::int64_t m, k, n, padding;  // B's leading stride is its contiguous extent + padding
};

// B(j, q) = values[j * k + q] / 64, stored in `dtype` with the case's layout.
std::vector<std::uint8_t> store_b(DType dtype, bool rows, const FewRowsCase& c, const std::vector<int>& values,
                                  std::int64_t& ldb) {
    ldb = (rows ? c.k : c.n) + c.padding;
    const std::int64_t outer = rows ? c.n : c.k;
    const std::size_t size = luminal::size_of(dtype);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(outer * ldb) * size, 0xFF);  // padding: NaN in all dtypes
    for (std::int64_t j = 0; j < c.n; ++j)
        for (std::int64_t q = 0; q < c.k; ++q) {
            const int n = values[static_cast<std::size_t>(j * c.k + q)];
            const std::int64_t at = rows ? j * ldb + q : q * ldb + j;
            std::uint8_t* p = bytes.data() + at * static_cast<std::int64_t>(size);
            if (dtype == DType::F32) {
                const float v = static_cast<float>(n) / 64.0f;
                std::memcpy(p, &v, 4);
            } else {
                const std::uint16_t b = dtype == DType::F16 ? half_bits(n) : bf16_bits(n);
                std::memcpy(p, &b, 2);
            }
        }
    return bytes;
}

std::vector<Isa> few_rows_isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni})
        if (luminal::cpu::quant::supports(isa)) out.push_back(isa);
    return out;
}

void check_few_rows(DType dtype, bool rows, const FewRowsCase& c, luminal::cpu::ThreadPool& pool) {
    CAPTURE(luminal::name_of(dtype));
    CAPTURE(rows);
    CAPTURE(c.m);
    CAPTURE(c.k);
    CAPTURE(c.n);
    CAPTURE(c.padding);
    constexpr std::int64_t kBatches = 3;
    std::mt19937 rng(static_cast<std::uint32_t>(c.m * 131 + c.k * 17 + c.n));
    std::uniform_int_distribution<int> value(-127, 127);
    std::uniform_real_distribution<float> activation(-1.0f, 1.0f);
    // A's rows at a stride of k + 3; a column stride of 2 for the columns layout (which takes any).
    const std::int64_t a_cs = rows ? 1 : 2, lda = c.k * a_cs + 3;
    std::vector<std::vector<float>> a(kBatches, std::vector<float>(static_cast<std::size_t>(c.m * lda)));
    std::vector<std::vector<int>> values(kBatches, std::vector<int>(static_cast<std::size_t>(c.n * c.k)));
    std::vector<std::vector<std::uint8_t>> b(kBatches);
    std::int64_t ldb = 0;
    for (std::int64_t t = 0; t < kBatches; ++t) {
        for (float& x : a[t]) x = activation(rng);
        for (int& v : values[t]) v = value(rng);
        b[t] = store_b(dtype, rows, c, values[t], ldb);
    }
    for (Isa isa : few_rows_isas()) {
        CAPTURE(luminal::cpu::quant::name_of(isa));
        std::vector<std::vector<float>> single(kBatches), threaded(kBatches);
        for (auto* outs : {&single, &threaded}) {
            std::vector<few::Batch> batches;
            for (std::int64_t t = 0; t < kBatches; ++t) {
                (*outs)[t].assign(static_cast<std::size_t>(c.m * c.n), NAN);
                batches.push_back({a[t].data(), b[t].data(), (*outs)[t].data()});
            }
            luminal::cpu::ThreadPool* threads = outs == &threaded ? &pool : nullptr;
            few::Scratch scratch;
            auto run = [&]<DType D>() {
                if (rows) few::rows_product<D>(isa, batches.data(), kBatches, c.m, c.k, lda, c.n, ldb, c.n, threads);
                else few::columns_product<D>(isa, batches.data(), kBatches, c.m, c.k, lda, a_cs, c.n, ldb, c.n, scratch, threads);
            };
            if (dtype == DType::F32) run.template operator()<DType::F32>();
            else if (dtype == DType::F16) run.template operator()<DType::F16>();
            else run.template operator()<DType::BF16>();
        }
        for (std::int64_t t = 0; t < kBatches; ++t) {
            CHECK(std::memcmp(single[t].data(), threaded[t].data(), single[t].size() * sizeof(float)) == 0);
            for (std::int64_t i = 0; i < c.m; ++i)
                for (std::int64_t j = 0; j < c.n; ++j) {
                    double want = 0, scale = 0;
                    for (std::int64_t q = 0; q < c.k; ++q) {
                        const double x = a[t][static_cast<std::size_t>(i * lda + q * a_cs)];
                        const double w = values[t][static_cast<std::size_t>(j * c.k + q)] / 64.0;
                        want += x * w;
                        scale += std::fabs(x * w);
                    }
                    const float got = single[t][static_cast<std::size_t>(i * c.n + j)];
                    if (!(std::fabs(got - want) <= 1e-6 * scale + 1e-30)) {
                        CAPTURE(t);
                        CAPTURE(i);
                        CAPTURE(j);
                        CHECK(got == doctest::Approx(want));
                        return;
                    }
                }
        }
    }
}

}  // namespace few_rows_test

TEST_CASE("few-rows products of f32, f16 and bf16 B, both layouts, every instruction set, 1 and 3 threads") {
    using namespace few_rows_test;
    luminal::cpu::ThreadPool pool(3);
    // Rows: k past whole vectors (16 and 8 lanes), n past groups of 8 rows; columns: n past 64 and
    // 32 columns and whole vectors; m from 1 to kMaxRows (tiles of 4, 2, 1 rows).
    const FewRowsCase cases[] = {{1, 64, 300, 0}, {1, 1, 1, 0},   {3, 7, 9, 5},  {8, 80, 17, 3},
                                 {2, 129, 65, 1}, {5, 16, 8, 0}, {4, 33, 130, 2}, {1, 64, 64, 64}};
    for (DType dtype : {DType::F32, DType::F16, DType::BF16})
        for (bool rows : {true, false})
            for (const FewRowsCase& c : cases) check_few_rows(dtype, rows, c, pool);
}

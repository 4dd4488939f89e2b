// DType: sizes, names, promotion, and the 16-bit float conversions, checked
// against bit patterns from the IEEE 754 binary16 / bfloat16 definitions.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <luminal/luminal.hpp>

using namespace luminal;

TEST_CASE("sizes and names") {
    CHECK(size_of(DType::F32) == 4);
    CHECK(size_of(DType::F16) == 2);
    CHECK(size_of(DType::BF16) == 2);
    CHECK(size_of(DType::I64) == 8);
    CHECK(size_of(DType::Bool) == 1);
    CHECK(name_of(DType::BF16) == "bf16");
    CHECK(name_of(DType::U8) == "u8");
}

TEST_CASE("promotion follows torch.promote_types") {
    CHECK(promote(DType::I32, DType::F16) == DType::F16);
    CHECK(promote(DType::F16, DType::BF16) == DType::F32);
    CHECK(promote(DType::Bool, DType::U8) == DType::U8);
    CHECK(promote(DType::U8, DType::I32) == DType::I32);
    CHECK(promote(DType::I32, DType::I64) == DType::I64);
    CHECK(promote(DType::Bool, DType::Bool) == DType::Bool);
}

TEST_CASE("f16 conversion") {
    CHECK(f32_to_f16_bits(1.0f) == 0x3C00);
    CHECK(f32_to_f16_bits(-2.0f) == 0xC000);
    CHECK(f32_to_f16_bits(65504.0f) == 0x7BFF);
    CHECK(f32_to_f16_bits(65520.0f) == 0x7C00);           // rounds to infinity
    CHECK(f32_to_f16_bits(5.9604645e-8f) == 0x0001);      // smallest subnormal
    CHECK(f32_to_f16_bits(1.0f + 1.0f / 2048) == 0x3C00); // tie rounds to even
    CHECK(f32_to_f16_bits(1.0f + 3.0f / 2048) == 0x3C02); // tie rounds to even (up)
    CHECK(f16_bits_to_f32(0x3555) == 0.333251953125f);
    CHECK(f16_bits_to_f32(0x0001) == 5.9604644775390625e-8f);
    CHECK(std::isinf(f16_bits_to_f32(0xFC00)));
    CHECK(std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bf16 conversion") {
    CHECK(f32_to_bf16_bits(1.0f) == 0x3F80);
    CHECK(f32_to_bf16_bits(3.140625f) == 0x4049);
    CHECK(bf16_bits_to_f32(0x4049) == 3.140625f);
    CHECK(f32_to_bf16_bits(1.0f + 1.0f / 256) == 0x3F80);  // tie to even
    CHECK(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

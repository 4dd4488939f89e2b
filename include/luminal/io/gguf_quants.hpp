#pragma once
// Decoders of ggml's block formats to f32, written from the format definitions
// (block sizes and the packing of quants and scales). A block of `block_bytes`
// bytes decodes to `block_elements` consecutive elements of a row. Multi-byte
// fields are little-endian; scales are f16 unless stated.
//
// Each decoder rounds as the reference dequantizers do (ggml's and the gguf
// Python package's): a sub-block's scale is formed first in f32 (d * scale),
// then each element is scale * q, then the minimum or offset term is added,
// each step rounded to f32. Compiling with FP contraction into FMA (e.g. GCC
// with -march=native) fuses the last two steps and can change the last bit.
#include "luminal/core/dtype.hpp"
#include "luminal/core/error.hpp"
#include "luminal/io/gguf_type.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace luminal::io {

namespace detail {

inline std::uint8_t gguf_byte(const std::byte* at) { return static_cast<std::uint8_t>(*at); }

inline float gguf_f16(const std::byte* at) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, at, sizeof bits);
    return f16_bits_to_f32(bits);
}

// Q4_0, 32 elements: f16 d, then 16 bytes whose low nibbles are elements 0-15
// and high nibbles 16-31; x = d * (q - 8).
inline void dequantize_q4_0_block(const std::byte* block, float* out) {
    const float d = gguf_f16(block);
    const std::byte* quants = block + 2;
    for (int i = 0; i < 16; ++i) {
        const std::uint8_t packed = gguf_byte(quants + i);
        out[i] = d * static_cast<float>((packed & 0x0F) - 8);
        out[i + 16] = d * static_cast<float>((packed >> 4) - 8);
    }
}

// Q4_1, 32 elements: f16 d, f16 m, nibbles as Q4_0; x = d * q + m.
inline void dequantize_q4_1_block(const std::byte* block, float* out) {
    const float d = gguf_f16(block);
    const float m = gguf_f16(block + 2);
    const std::byte* quants = block + 4;
    for (int i = 0; i < 16; ++i) {
        const std::uint8_t packed = gguf_byte(quants + i);
        out[i] = d * static_cast<float>(packed & 0x0F) + m;
        out[i + 16] = d * static_cast<float>(packed >> 4) + m;
    }
}

// The 5-bit quants of Q5_0/Q5_1: nibbles as Q4_0, and bit i of a 32-bit word
// is the fifth bit of element i.
inline void unpack_q5_quants(const std::byte* high_bits, const std::byte* nibbles, int* quants) {
    std::uint32_t fifth_bits = 0;
    std::memcpy(&fifth_bits, high_bits, sizeof fifth_bits);
    for (int i = 0; i < 16; ++i) {
        const std::uint8_t packed = gguf_byte(nibbles + i);
        quants[i] = (packed & 0x0F) | static_cast<int>(((fifth_bits >> i) & 1) << 4);
        quants[i + 16] = (packed >> 4) | static_cast<int>(((fifth_bits >> (i + 16)) & 1) << 4);
    }
}

// Q5_0, 32 elements: f16 d, u32 fifth bits, nibbles; x = d * (q - 16).
inline void dequantize_q5_0_block(const std::byte* block, float* out) {
    const float d = gguf_f16(block);
    int quants[32];
    unpack_q5_quants(block + 2, block + 6, quants);
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(quants[i] - 16);
}

// Q5_1, 32 elements: f16 d, f16 m, u32 fifth bits, nibbles; x = d * q + m.
inline void dequantize_q5_1_block(const std::byte* block, float* out) {
    const float d = gguf_f16(block);
    const float m = gguf_f16(block + 2);
    int quants[32];
    unpack_q5_quants(block + 4, block + 8, quants);
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(quants[i]) + m;
}

// Q8_0, 32 elements: f16 d, then 32 int8 quants; x = d * q.
inline void dequantize_q8_0_block(const std::byte* block, float* out) {
    const float d = gguf_f16(block);
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<std::int8_t>(gguf_byte(block + 2 + i)));
}

// Q2_K, 256 elements in 16 sub-blocks of 16: 16 scale bytes (low nibble scale,
// high nibble min), 64 bytes of 2-bit quants, f16 d, f16 dmin. Each half of 128
// elements reads 32 bytes four times, at bit shifts 0, 2, 4, 6;
// x = (d * scale) * q - dmin * min.
inline void dequantize_q2_k_block(const std::byte* block, float* out) {
    const std::byte* scales = block;
    const std::byte* quants = block + 16;
    const float d = gguf_f16(block + 80);
    const float dmin = gguf_f16(block + 82);
    for (int i = 0; i < 256; ++i) {
        const int half = i / 128, shift = 2 * ((i % 128) / 32), lane = i % 32;
        const std::uint8_t scale_byte = gguf_byte(scales + i / 16);
        const float scale = d * static_cast<float>(scale_byte & 0x0F);
        const float minimum = dmin * static_cast<float>(scale_byte >> 4);
        const int q = (gguf_byte(quants + half * 32 + lane) >> shift) & 3;
        out[i] = scale * static_cast<float>(q) - minimum;
    }
}

// Q3_K, 256 elements in 16 sub-blocks of 16: 32 bytes of high bits (bit b of
// byte l belongs to element 32 b + l), 64 bytes of 2-bit low quants (packed as
// Q2_K), 12 bytes of 6-bit signed scales, f16 d. Scale s has its low 4 bits in
// byte s % 8 (low nibble for s < 8, high nibble after) and its top 2 bits in byte
// 8 + s % 4 at shift 2 * (s / 4); it is stored offset by 32. The quant is
// low - 4 when the high bit is clear, low when set; x = (d * scale) * q.
inline void dequantize_q3_k_block(const std::byte* block, float* out) {
    const std::byte* high_bits = block;
    const std::byte* low_quants = block + 32;
    const std::byte* packed_scales = block + 96;
    const float d = gguf_f16(block + 108);
    float scales[16];
    for (int s = 0; s < 16; ++s) {
        const int low = (gguf_byte(packed_scales + s % 8) >> (s < 8 ? 0 : 4)) & 0x0F;
        const int high = (gguf_byte(packed_scales + 8 + s % 4) >> (2 * (s / 4))) & 3;
        scales[s] = d * static_cast<float>((low | (high << 4)) - 32);
    }
    for (int i = 0; i < 256; ++i) {
        const int half = i / 128, shift = 2 * ((i % 128) / 32), lane = i % 32;
        const int low = (gguf_byte(low_quants + half * 32 + lane) >> shift) & 3;
        const bool high = ((gguf_byte(high_bits + lane) >> (i / 32)) & 1) != 0;
        out[i] = scales[i / 16] * static_cast<float>(high ? low : low - 4);
    }
}

// The 6-bit scales and mins of Q4_K/Q5_K's eight sub-blocks, packed in 12 bytes:
// for j < 4, scale j and min j are the low 6 bits of bytes j and 4 + j; for
// j >= 4, byte 8 + (j - 4) holds their low 4 bits (scale in the low nibble,
// min in the high) and the top 2 bits of bytes j - 4 and j give their high 2.
inline void unpack_k_scales(const std::byte* packed, int* scales, int* mins) {
    for (int j = 0; j < 4; ++j) {
        scales[j] = gguf_byte(packed + j) & 0x3F;
        mins[j] = gguf_byte(packed + 4 + j) & 0x3F;
        const std::uint8_t low_bits = gguf_byte(packed + 8 + j);
        scales[j + 4] = (low_bits & 0x0F) | ((gguf_byte(packed + j) >> 6) << 4);
        mins[j + 4] = (low_bits >> 4) | ((gguf_byte(packed + 4 + j) >> 6) << 4);
    }
}

// Q4_K and Q5_K: 8 sub-blocks of 32 with a 6-bit scale and min each; the
// 128 bytes of nibbles hold two sub-blocks per 32-byte chunk, the first in the
// low nibbles. Q5_K adds a fifth bit per element (bit b of byte l belongs to
// element 32 b + l); x = (d * scale) * q - dmin * min.
inline void dequantize_k_sub_blocks(const std::byte* block, const std::byte* fifth_bits, const std::byte* quants,
                                    float* out) {
    const float d = gguf_f16(block);
    const float dmin = gguf_f16(block + 2);
    int scales[8], mins[8];
    unpack_k_scales(block + 4, scales, mins);
    for (int sub = 0; sub < 8; ++sub) {
        const float scale = d * static_cast<float>(scales[sub]);
        const float minimum = dmin * static_cast<float>(mins[sub]);
        const std::byte* chunk = quants + 32 * (sub / 2);
        const int shift = 4 * (sub % 2);
        for (int lane = 0; lane < 32; ++lane) {
            int q = (gguf_byte(chunk + lane) >> shift) & 0x0F;
            if (fifth_bits != nullptr) q |= ((gguf_byte(fifth_bits + lane) >> sub) & 1) << 4;
            out[32 * sub + lane] = scale * static_cast<float>(q) - minimum;
        }
    }
}

// Q4_K, 256 elements: f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles.
inline void dequantize_q4_k_block(const std::byte* block, float* out) {
    dequantize_k_sub_blocks(block, nullptr, block + 16, out);
}

// Q5_K, 256 elements: as Q4_K with the 32 bytes of fifth bits between the
// scales and the nibbles.
inline void dequantize_q5_k_block(const std::byte* block, float* out) {
    dequantize_k_sub_blocks(block, block + 16, block + 48, out);
}

// Q6_K, 256 elements in 16 sub-blocks of 16: 128 bytes of low nibbles, 64
// bytes of 2-bit high parts, 16 int8 scales, f16 d. Within each half of 128
// elements, element r has its low nibble in byte r % 64 of the half's 64 (low
// nibble for r < 64) and its high part in byte r % 32 of the half's 32 at shift
// 2 * (r / 32); x = (d * scale) * (q - 32).
inline void dequantize_q6_k_block(const std::byte* block, float* out) {
    const std::byte* low_nibbles = block;
    const std::byte* high_parts = block + 128;
    const std::byte* scales = block + 192;
    const float d = gguf_f16(block + 208);
    for (int i = 0; i < 256; ++i) {
        const int half = i / 128, r = i % 128;
        const int low = (gguf_byte(low_nibbles + 64 * half + r % 64) >> (4 * (r / 64))) & 0x0F;
        const int high = (gguf_byte(high_parts + 32 * half + r % 32) >> (2 * (r / 32))) & 3;
        const float scale = d * static_cast<float>(static_cast<std::int8_t>(gguf_byte(scales + i / 16)));
        out[i] = scale * static_cast<float>((low | (high << 4)) - 32);
    }
}

inline void dequantize_f16_element(const std::byte* element, float* out) { *out = gguf_f16(element); }

inline void dequantize_bf16_element(const std::byte* element, float* out) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, element, sizeof bits);
    *out = bf16_bits_to_f32(bits);
}

// A template argument rather than a function pointer, so each loop inlines its decoder.
template <GgufType type, void (*decode)(const std::byte*, float*)>
void decode_each_block(std::span<const std::byte> blocks, std::span<float> out) {
    constexpr GgufTypeLayout layout = layout_of(type);
    for (std::size_t i = 0; i < out.size() / layout.block_elements; ++i)
        decode(blocks.data() + i * layout.block_bytes, out.data() + i * layout.block_elements);
}

}  // namespace detail

inline constexpr GgufType gguf_dequantizable_types[] = {
    GgufType::F32,  GgufType::F16,  GgufType::BF16, GgufType::Q4_0, GgufType::Q4_1, GgufType::Q5_0, GgufType::Q5_1,
    GgufType::Q8_0, GgufType::Q2_K, GgufType::Q3_K, GgufType::Q4_K, GgufType::Q5_K, GgufType::Q6_K,
};

constexpr bool can_dequantize(GgufType type) {
    return std::ranges::find(gguf_dequantizable_types, type) != std::end(gguf_dequantizable_types);
}

// "F32, F16, ...": for error messages.
inline std::string gguf_dequantizable_type_names() {
    std::string names;
    for (GgufType type : gguf_dequantizable_types) {
        if (!names.empty()) names += ", ";
        names += name_of(type);
    }
    return names;
}

// Decodes whole blocks of `type`: `blocks` must hold exactly out.size() /
// block_elements blocks.
inline void dequantize_blocks(GgufType type, std::span<const std::byte> blocks, std::span<float> out) {
    if (!can_dequantize(type))
        throw Error("dequantize_blocks", fmt::format("luminal cannot dequantize {} (it can: {})", name_of(type),
                                                     gguf_dequantizable_type_names()));
    const GgufTypeLayout layout = layout_of(type);
    const std::size_t block_count = out.size() / layout.block_elements;
    if (out.size() != block_count * layout.block_elements || blocks.size() != block_count * layout.block_bytes)
        throw Error("dequantize_blocks",
                    fmt::format("{} bytes of {} (blocks of {} elements in {} bytes) do not decode to {} elements",
                                blocks.size(), name_of(type), layout.block_elements, layout.block_bytes, out.size()));
    using namespace detail;
    switch (type) {
        case GgufType::F32:  // an empty span's data() may be null, which memcpy must not see
            if (!out.empty()) std::memcpy(out.data(), blocks.data(), blocks.size());
            return;
        case GgufType::F16: return decode_each_block<GgufType::F16, dequantize_f16_element>(blocks, out);
        case GgufType::BF16: return decode_each_block<GgufType::BF16, dequantize_bf16_element>(blocks, out);
        case GgufType::Q4_0: return decode_each_block<GgufType::Q4_0, dequantize_q4_0_block>(blocks, out);
        case GgufType::Q4_1: return decode_each_block<GgufType::Q4_1, dequantize_q4_1_block>(blocks, out);
        case GgufType::Q5_0: return decode_each_block<GgufType::Q5_0, dequantize_q5_0_block>(blocks, out);
        case GgufType::Q5_1: return decode_each_block<GgufType::Q5_1, dequantize_q5_1_block>(blocks, out);
        case GgufType::Q8_0: return decode_each_block<GgufType::Q8_0, dequantize_q8_0_block>(blocks, out);
        case GgufType::Q2_K: return decode_each_block<GgufType::Q2_K, dequantize_q2_k_block>(blocks, out);
        case GgufType::Q3_K: return decode_each_block<GgufType::Q3_K, dequantize_q3_k_block>(blocks, out);
        case GgufType::Q4_K: return decode_each_block<GgufType::Q4_K, dequantize_q4_k_block>(blocks, out);
        case GgufType::Q5_K: return decode_each_block<GgufType::Q5_K, dequantize_q5_k_block>(blocks, out);
        case GgufType::Q6_K: return decode_each_block<GgufType::Q6_K, dequantize_q6_k_block>(blocks, out);
        default: return;  // can_dequantize lists exactly the cases above
    }
}

}  // namespace luminal::io

#pragma once
// ggml's block formats as CUDA device functions, written from the format
// definitions in io/gguf_quants.hpp (which say where each quant and scale
// lives). For every kept format F (quant_format_tag names it):
//
//  * luminal_F_element(block, e): element e of a block as f32, rounded as io's
//    dequantizers round (the scale product first, then the offset);
//  * luminal_F_dot_q8(block, j, xq, dx, sx): the product of the block's j-th
//    32-element group with an 8-bit activation block (xq: its 32 int8 quants
//    as 8 words, dx its scale, sx the sum of its quants), by integer dot
//    products of four bytes (__dp4a) scaled once per group or sub-block.
//
// Every field of every format lies at an even offset of a block of even
// size, so blocks are read with 2-byte loads wherever they start. One
// prelude holds every format, so a launch group of products of several
// formats includes it once (launch_groups.hpp).
#include <string_view>

#include "luminal/lowering/quantized.hpp"

namespace luminal::cuda {

// The name a format's device functions carry.
inline std::string_view quant_format_tag(QuantFormat f) {
    switch (f) {
        case QuantFormat::Q8_0: return "q8_0";
        case QuantFormat::Q4_0: return "q4_0";
        case QuantFormat::Q4_1: return "q4_1";
        case QuantFormat::Q5_0: return "q5_0";
        case QuantFormat::Q5_1: return "q5_1";
        case QuantFormat::Q4_K: return "q4_k";
        case QuantFormat::Q6_K: return "q6_k";
        default: break;
    }
    throw Error("cuda quantized kernels", fmt::format("no device kernels for format {}", io::name_of(f)));
}

inline constexpr std::string_view kQuantPrelude = R"(__device__ __forceinline__ unsigned luminal_u16(const unsigned char* p) { return *(const unsigned short*)p; }
__device__ __forceinline__ unsigned luminal_u32(const unsigned char* p) { return luminal_u16(p) | (luminal_u16(p + 2) << 16); }
// The `have` (< 16) bytes left at p as a 16-byte vector, zero beyond them.
__device__ __forceinline__ uint4 luminal_tail_vector(const unsigned char* p, i64 have) {
  unsigned w[4] = {0u, 0u, 0u, 0u};
  for (int i = 0; i < 16 && i < have; ++i) w[i / 4] |= (unsigned)p[i] << (8 * (i % 4));
  return uint4{w[0], w[1], w[2], w[3]};
}
__device__ __forceinline__ float luminal_f16_at(const unsigned char* p) { return __half2float(__ushort_as_half((unsigned short)luminal_u16(p))); }
// Nibble e (< 32) of 16 packed bytes: elements 0-15 in the low nibbles, 16-31 in the high.
__device__ __forceinline__ int luminal_nibble(const unsigned char* q, int e) { return e < 16 ? q[e] & 15 : q[e - 16] >> 4; }
// The fifth bits of elements 4w..4w+3 (bits 4w.. of h) moved to bit 4 of each byte.
__device__ __forceinline__ int luminal_fifth_bits(unsigned h, int w) {
  h >>= 4 * w;
  return (int)(((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25));
}
// Scale and min of sub-block j of a K super-block's 12 packed bytes.
__device__ __forceinline__ void luminal_k_scale(const unsigned char* p, int j, int& scale, int& minimum) {
  if (j < 4) { scale = p[j] & 63; minimum = p[j + 4] & 63; }
  else { scale = (p[j + 4] & 15) | ((p[j - 4] >> 6) << 4); minimum = (p[j + 4] >> 4) | ((p[j] >> 6) << 4); }
}
__device__ __forceinline__ float luminal_q8_0_element(const unsigned char* b, int e) { return luminal_f16_at(b) * (float)(signed char)b[2 + e]; }
__device__ __forceinline__ float luminal_q4_0_element(const unsigned char* b, int e) { return luminal_f16_at(b) * (float)(luminal_nibble(b + 2, e) - 8); }
__device__ __forceinline__ float luminal_q4_1_element(const unsigned char* b, int e) { return luminal_f16_at(b) * (float)luminal_nibble(b + 4, e) + luminal_f16_at(b + 2); }
__device__ __forceinline__ float luminal_q5_0_element(const unsigned char* b, int e) {
  const int q = luminal_nibble(b + 6, e) | (int)(((luminal_u32(b + 2) >> e) & 1u) << 4);
  return luminal_f16_at(b) * (float)(q - 16);
}
__device__ __forceinline__ float luminal_q5_1_element(const unsigned char* b, int e) {
  const int q = luminal_nibble(b + 8, e) | (int)(((luminal_u32(b + 4) >> e) & 1u) << 4);
  return luminal_f16_at(b) * (float)q + luminal_f16_at(b + 2);
}
__device__ __forceinline__ float luminal_q4_k_element(const unsigned char* b, int e) {
  const int j = e / 32;
  int scale, minimum;
  luminal_k_scale(b + 4, j, scale, minimum);
  const int q = (b[16 + 32 * (j / 2) + e % 32] >> (4 * (j % 2))) & 15;
  return (luminal_f16_at(b) * (float)scale) * (float)q - luminal_f16_at(b + 2) * (float)minimum;
}
__device__ __forceinline__ float luminal_q6_k_element(const unsigned char* b, int e) {
  const int half = e / 128, r = e % 128;
  const int low = (b[64 * half + r % 64] >> (4 * (r / 64))) & 15, high = (b[128 + 32 * half + r % 32] >> (2 * (r / 32))) & 3;
  return (luminal_f16_at(b + 208) * (float)(signed char)b[192 + e / 16]) * (float)((low | (high << 4)) - 32);
}
__device__ __forceinline__ float luminal_q8_0_dot_q8(const unsigned char* b, int, const int* xq, float dx, int) {
  int sum = 0;
  for (int w = 0; w < 8; ++w) sum = __dp4a((int)luminal_u32(b + 2 + 4 * w), xq[w], sum);
  return luminal_f16_at(b) * dx * (float)sum;
}
// Sum of the nibble quants times the activation quants of a 32-element group of 16 packed bytes.
__device__ __forceinline__ int luminal_nibbles_dot(const unsigned char* q, const int* xq, unsigned fifth) {
  int sum = 0;
  for (int w = 0; w < 4; ++w) {
    const unsigned packed = luminal_u32(q + 4 * w);
    sum = __dp4a((int)(packed & 0x0f0f0f0fu) | luminal_fifth_bits(fifth, w), xq[w], sum);
    sum = __dp4a((int)((packed >> 4) & 0x0f0f0f0fu) | luminal_fifth_bits(fifth >> 16, w), xq[w + 4], sum);
  }
  return sum;
}
__device__ __forceinline__ float luminal_q4_0_dot_q8(const unsigned char* b, int, const int* xq, float dx, int sx) {
  return luminal_f16_at(b) * dx * (float)(luminal_nibbles_dot(b + 2, xq, 0u) - 8 * sx);
}
__device__ __forceinline__ float luminal_q4_1_dot_q8(const unsigned char* b, int, const int* xq, float dx, int sx) {
  return luminal_f16_at(b) * dx * (float)luminal_nibbles_dot(b + 4, xq, 0u) + luminal_f16_at(b + 2) * dx * (float)sx;
}
__device__ __forceinline__ float luminal_q5_0_dot_q8(const unsigned char* b, int, const int* xq, float dx, int sx) {
  return luminal_f16_at(b) * dx * (float)(luminal_nibbles_dot(b + 6, xq, luminal_u32(b + 2)) - 16 * sx);
}
__device__ __forceinline__ float luminal_q5_1_dot_q8(const unsigned char* b, int, const int* xq, float dx, int sx) {
  return luminal_f16_at(b) * dx * (float)luminal_nibbles_dot(b + 8, xq, luminal_u32(b + 4)) + luminal_f16_at(b + 2) * dx * (float)sx;
}
__device__ __forceinline__ float luminal_q4_k_dot_q8(const unsigned char* b, int j, const int* xq, float dx, int sx) {
  const unsigned char* q = b + 16 + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  int sum = 0;
  for (int w = 0; w < 8; ++w) sum = __dp4a((int)((luminal_u32(q + 4 * w) >> shift) & 0x0f0f0f0fu), xq[w], sum);
  int scale, minimum;
  luminal_k_scale(b + 4, j, scale, minimum);
  return dx * ((luminal_f16_at(b) * (float)scale) * (float)sum - (luminal_f16_at(b + 2) * (float)minimum) * (float)sx);
}
// Group j of Q6_K: elements 32j.. of half j / 4, two sub-blocks of 16 with their own scales; quants are q - 32.
__device__ __forceinline__ float luminal_q6_k_dot_q8(const unsigned char* b, int j, const int* xq, float dx, int) {
  const int half = j / 4, quarter = j % 4;
  const unsigned char* low = b + 64 * half + 32 * (quarter % 2);
  const unsigned char* high = b + 128 + 32 * half;
  int sums[2] = {0, 0}, offsets[2] = {0, 0};
  for (int w = 0; w < 8; ++w) {
    const unsigned q = ((luminal_u32(low + 4 * w) >> (4 * (quarter / 2))) & 0x0f0f0f0fu) |
                       (((luminal_u32(high + 4 * w) >> (2 * quarter)) & 0x03030303u) << 4);
    sums[w / 4] = __dp4a((int)q, xq[w], sums[w / 4]);
    offsets[w / 4] = __dp4a(0x20202020, xq[w], offsets[w / 4]);
  }
  const float d = luminal_f16_at(b + 208);
  return dx * d * ((float)(signed char)b[192 + 2 * j] * (float)(sums[0] - offsets[0]) +
                   (float)(signed char)b[193 + 2 * j] * (float)(sums[1] - offsets[1]));
}
)";

}  // namespace luminal::cuda

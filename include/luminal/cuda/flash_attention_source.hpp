#pragma once
// A FlashAttentionKernel as CUDA source (the layout is in
// flash_attention_kernel.hpp). Shared memory: the block's queries as bf16
// parts [kFlashRows][D + pad] each, the tile's keys [kFlashKeys][D + pad]
// and its values transposed [D][kFlashKeys + pad], so every fragment a warp
// loads is one 32-bit word per lane, on distinct banks. Warp w multiplies the
// rows of m16 tile w; a block of fewer than 4 warps (the host runner's) takes
// the tiles in turns, one walk over the keys per turn, and warps past the 4th
// (a launch group's) only join the barriers.
#include <cmath>
#include <string>

#include "luminal/cuda/attention_source.hpp"
#include "luminal/cuda/flash_attention_kernel.hpp"
#include "luminal/cuda/gemv_source.hpp"

namespace luminal::cuda {

inline std::string FlashAttentionKernel::source() const {
    using namespace source_detail;
    using attention_detail::AffineView;
    const std::int64_t d = depth, row = d + kFlashPad, vrow = kFlashKeys + kFlashPad;
    std::string sizes;
    ExpressionPrinter once(sizes, "c");
    const std::string h = once.print(heads, "0"), g = once.print(group, "0"), s = once.print(tokens, "0"), t = once.print(keys, "0");
    const AffineView qa{q_view, once}, ka{k_view, once}, va{v_view, once}, ba{bias_view, once};
    const std::string q_at = qa.start() + qa.term(0, "head") + qa.term(1, "gi") + qa.term(2, "pos") + qa.term(3, "e");
    const std::string k_at = ka.start() + ka.term(0, "head") + ka.term(2, "j") + ka.term(3, "c * 8");
    const std::string v_at = va.start() + va.term(0, "head") + va.term(2, "c * 8") + va.term(3, "j");
    auto bias_row = [&](std::string_view r) {
        return ba.start() + ba.term(0, "head") + ba.term(1, fmt::format("gi_{}", r)) + ba.term(2, fmt::format("pos_{}", r));
    };
    // Every expression is printed before the declarations they need are written out.
    const std::string bias_a = bias_row("a"), bias_b = bias_row("b"), bias_key = ba.term(3, "key");
    const std::string ninf = "(-__int_as_float(0x7f800000))";
    const double log2e = 1.4426950408889634;

    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude) + std::string(kAttentionPrelude);
    const std::string declared = signature(entry(), out, inputs);
    code += block_bound_declaration(declared, 1) + declared + " {\n";
    code += dim_declarations({&once}) + sizes;
    // 32-bit positions: rows and keys are far below 2^31; only buffer offsets are 64-bit. The latest rows (the
    // most keys under a causal mask) go first; a KV head's blocks of the same rows run side by side and share the
    // bias rows in L2.
    code += fmt::format("  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5), g = lane >> 2, q = lane & 3;\n"
                        "  const int group = (int){1}, tokens = (int){2}, keys = (int){3}, all_rows = group * tokens;\n"
                        "  const int row_blocks = (all_rows + {4} - 1) / {4};\n"
                        "  const int head = (int)blockIdx.x % (int){0}, f0 = (row_blocks - 1 - (int)blockIdx.x / (int){0}) * {4};\n"
                        "  const int rows = all_rows - f0 < {4} ? all_rows - f0 : {4};\n",
                        h, g, s, t, kFlashRows);
    code += fmt::format("  unsigned short* const q_parts = (unsigned short*)luminal_dynamic_shared();\n"
                        "  unsigned short* const k_tile = q_parts + {0};\n  unsigned short* const v_tile = k_tile + {1};\n"
                        "  __shared__ int live_tile[3];\n",
                        query_parts() * kFlashRows * row, kFlashKeys * row);
    // The queries, each split into its bf16 parts (rows past the block are zeros).
    code += fmt::format("  for (int x = threadIdx.x; x < {0} * {1}; x += blockDim.x) {{\n"
                        "    const int r = x / {1}, e = x % {1};\n    float v = 0.0f;\n"
                        "    if (r < rows) {{\n      const int f = f0 + r, pos = f / group, gi = f % group;\n      v = {2};\n    }}\n"
                        "    const unsigned hi = luminal_bf16_bits(v);\n    q_parts[r * {3} + e] = (unsigned short)hi;\n{5}  }}\n"
                        "  if (threadIdx.x < 3) live_tile[threadIdx.x] = 0;\n  __syncthreads();\n",
                        kFlashRows, d, widen(inputs[0], "in0[" + q_at + "]"), row, kFlashRows * row,
                        query_parts() == 1 ? std::string()
                                           : fmt::format("    const float rest = v - __uint_as_float(hi << 16);\n"
                                                         "    const unsigned mid = luminal_bf16_bits(rest);\n"
                                                         "    q_parts[{1} + r * {0} + e] = (unsigned short)mid;\n"
                                                         "    q_parts[2 * {1} + r * {0} + e] = (unsigned short)luminal_bf16_bits(rest - __uint_as_float(mid << 16));\n",
                                                         row, kFlashRows * row));
    code += fmt::format("  int turn = 0;\n  for (int first = 0; first < {0}; first += warps) {{\n"
                        "  const int mt = first + warp;\n  const bool mine = mt < {0};\n"
                        "  const int r_a = mt * 16 + g, r_b = r_a + 8;\n"
                        "  const bool valid_a = mine && r_a < rows, valid_b = mine && r_b < rows;\n"
                        "  const int f_a = f0 + (valid_a ? r_a : 0), f_b = f0 + (valid_b ? r_b : 0);\n"
                        "  const int pos_a = f_a / group, gi_a = f_a % group, pos_b = f_b / group, gi_b = f_b % group;\n"
                        "  const i64 bias_a = {1}, bias_b = {2};\n"
                        "  float o[{3}][4], m_a = {4}, m_b = {4}, l_a = 0.0f, l_b = 0.0f;\n"
                        "  #pragma unroll\n  for (int i = 0; i < {3} * 4; ++i) (&o[0][0])[i] = 0.0f;\n",
                        kFlashRows / 16, bias_a, bias_b, d / 8, ninf);
    // The tile's bias for this thread's rows (in the scores' fragment layout); the block skips a tile no row sees.
    // Flags rotate over three turns: thread 0 clears the next turn's flag before this turn's barrier, after
    // every thread read it two turns ago.
    code += fmt::format("  for (int j0 = 0; j0 < keys; j0 += {0}, ++turn) {{\n"
                        "    if (threadIdx.x == 0) live_tile[(turn + 1) % 3] = 0;\n"
                        "    float sc[8][4];\n    bool live = false;\n"
                        "    #pragma unroll\n    for (int nt = 0; nt < 8; ++nt)\n    #pragma unroll\n    for (int i = 0; i < 4; ++i) {{\n"
                        "      const int key = j0 + nt * 8 + 2 * q + (i & 1);\n"
                        "      const bool seen = (i < 2 ? valid_a : valid_b) && key < keys;\n"
                        "      sc[nt][i] = seen ? {1} : {2};\n      live = live || sc[nt][i] != {2};\n    }}\n"
                        "    if (live) live_tile[turn % 3] = 1;\n    __syncthreads();\n"
                        "    if (live_tile[turn % 3] == 0) continue;\n",
                        kFlashKeys, widen(inputs[3], "in3[(i < 2 ? bias_a : bias_b)" + bias_key + "]"), ninf);
    // Keys as stored; values transposed, a key per thread so the 16-bit stores of a warp fall on distinct words.
    code += fmt::format("    for (int x = threadIdx.x; x < {0} * {1}; x += blockDim.x) {{\n"
                        "      const int jj = x / {1}, c = x % {1}, j = j0 + jj;\n      uint4 w = uint4{{0u, 0u, 0u, 0u}};\n"
                        "      if (j < keys) w = *reinterpret_cast<const uint4*>(in1 + {2});\n"
                        "      *reinterpret_cast<uint4*>(k_tile + jj * {3} + c * 8) = w;\n    }}\n"
                        "    for (int x = threadIdx.x; x < {0} * {1}; x += blockDim.x) {{\n"
                        "      const int jj = x % {0}, c = x / {0}, j = j0 + jj;\n      uint4 w = uint4{{0u, 0u, 0u, 0u}};\n"
                        "      if (j < keys) w = *reinterpret_cast<const uint4*>(in2 + {4});\n"
                        "      const unsigned words[4] = {{w.x, w.y, w.z, w.w}};\n"
                        "      #pragma unroll\n      for (int e = 0; e < 8; ++e)\n"
                        "        v_tile[(c * 8 + e) * {5} + jj] = (unsigned short)(e % 2 ? words[e / 2] >> 16 : words[e / 2] & 0xffffu);\n"
                        "    }}\n    __syncthreads();\n    if (!mine) continue;\n",
                        kFlashKeys, d / 8, k_at, row, v_at, vrow);
    // Scores: the queries' parts against the keys, k16 steps over D.
    code += fmt::format("    float acc[8][4];\n    #pragma unroll\n    for (int i = 0; i < 32; ++i) (&acc[0][0])[i] = 0.0f;\n"
                        "    #pragma unroll\n    for (int ks = 0; ks < {0}; ks += 16) {{\n      unsigned b[8][2];\n"
                        "      #pragma unroll\n      for (int nt = 0; nt < 8; ++nt) {{\n"
                        "        const unsigned short* const key = k_tile + (nt * 8 + g) * {1} + ks + 2 * q;\n"
                        "        b[nt][0] = *reinterpret_cast<const unsigned*>(key);\n"
                        "        b[nt][1] = *reinterpret_cast<const unsigned*>(key + 8);\n      }}\n"
                        "      #pragma unroll\n      for (int p = 0; p < {2}; ++p) {{\n"
                        "        const unsigned short* const at = q_parts + p * {3} + (mt * 16 + g) * {1} + ks + 2 * q;\n"
                        "        const unsigned a[4] = {{*reinterpret_cast<const unsigned*>(at), *reinterpret_cast<const unsigned*>(at + 8 * {1}),\n"
                        "                               *reinterpret_cast<const unsigned*>(at + 8), *reinterpret_cast<const unsigned*>(at + 8 * {1} + 8)}};\n"
                        "        #pragma unroll\n        for (int nt = 0; nt < 8; ++nt) luminal_mma_bf16(acc[nt], a, b[nt]);\n      }}\n    }}\n",
                        d, row, query_parts(), kFlashRows * row);
    // Online softmax in log2 units: the rows' maxima over the quad of lanes that holds each row, the old
    // accumulators rescaled once per tile.
    code += fmt::format("    float top_a = {0}, top_b = {0};\n"
                        "    #pragma unroll\n    for (int nt = 0; nt < 8; ++nt)\n    #pragma unroll\n    for (int i = 0; i < 4; ++i) {{\n"
                        "      const float x = sc[nt][i] == {0} ? {0} : fmaf(acc[nt][i], {1:.9g}f, sc[nt][i] * {2:.9g}f);\n"
                        "      sc[nt][i] = x;\n      if (i < 2) top_a = fmaxf(top_a, x); else top_b = fmaxf(top_b, x);\n    }}\n"
                        "    #pragma unroll\n    for (int x = 1; x < 4; x <<= 1) {{\n"
                        "      top_a = fmaxf(top_a, __shfl_xor_sync(0xffffffffu, top_a, x));\n"
                        "      top_b = fmaxf(top_b, __shfl_xor_sync(0xffffffffu, top_b, x));\n    }}\n"
                        "    const float new_a = fmaxf(m_a, top_a), new_b = fmaxf(m_b, top_b);\n"
                        "    const float keep_a = new_a == {0} ? 1.0f : luminal_exp2(m_a - new_a), keep_b = new_b == {0} ? 1.0f : luminal_exp2(m_b - new_b);\n"
                        "    const float base_a = new_a == {0} ? 0.0f : new_a, base_b = new_b == {0} ? 0.0f : new_b;\n"
                        "    m_a = new_a;\n    m_b = new_b;\n    float sum_a = 0.0f, sum_b = 0.0f;\n"
                        "    #pragma unroll\n    for (int nt = 0; nt < 8; ++nt)\n    #pragma unroll\n    for (int i = 0; i < 4; ++i) {{\n"
                        "      const float p = luminal_exp2(sc[nt][i] - (i < 2 ? base_a : base_b));\n"
                        "      sc[nt][i] = p;\n      if (i < 2) sum_a += p; else sum_b += p;\n    }}\n"
                        "    l_a = l_a * keep_a + sum_a;\n    l_b = l_b * keep_b + sum_b;\n"
                        "    #pragma unroll\n    for (int nt = 0; nt < {3}; ++nt) {{\n"
                        "      o[nt][0] *= keep_a; o[nt][1] *= keep_a; o[nt][2] *= keep_b; o[nt][3] *= keep_b;\n    }}\n",
                        ninf, scale * log2e, log2e, d / 8);
    // P V: the scores' fragments of two n8 tiles are the A fragment of one k16 step; each weight in its parts.
    code += fmt::format("    #pragma unroll\n    for (int kk = 0; kk < {0}; ++kk) {{\n      unsigned a[{1}][4];\n"
                        "      #pragma unroll\n      for (int r = 0; r < 4; ++r) {{\n"
                        "        const float x0 = sc[2 * kk + r / 2][2 * (r % 2)], x1 = sc[2 * kk + r / 2][2 * (r % 2) + 1];\n"
                        "        const unsigned h0 = luminal_bf16_bits(x0), h1 = luminal_bf16_bits(x1);\n"
                        "        const unsigned m0 = luminal_bf16_bits(x0 - __uint_as_float(h0 << 16)), m1 = luminal_bf16_bits(x1 - __uint_as_float(h1 << 16));\n"
                        "        a[0][r] = h0 | (h1 << 16);\n        a[1][r] = m0 | (m1 << 16);\n"
                        "      }}\n"
                        "      #pragma unroll\n      for (int nt = 0; nt < {2}; ++nt) {{\n"
                        "        const unsigned short* const value = v_tile + (nt * 8 + g) * {3} + kk * 16 + 2 * q;\n"
                        "        const unsigned b[2] = {{*reinterpret_cast<const unsigned*>(value), *reinterpret_cast<const unsigned*>(value + 8)}};\n"
                        "        #pragma unroll\n        for (int p = 0; p < {1}; ++p) luminal_mma_bf16(o[nt], a[p], b);\n      }}\n    }}\n  }}\n",
                        kFlashKeys / 16, kFlashWeightParts, d / 8, vrow);
    // Each row's sum over its quad, then the normalised rows (a row that sees no key: 0 / 0, as Attention's NaN).
    code += fmt::format("  if (!mine) continue;\n"
                        "  #pragma unroll\n  for (int x = 1; x < 4; x <<= 1) {{\n"
                        "    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);\n    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);\n  }}\n"
                        "  #pragma unroll\n  for (int nt = 0; nt < {0}; ++nt)\n  #pragma unroll\n  for (int i = 0; i < 4; ++i) {{\n"
                        "    if (!(i < 2 ? valid_a : valid_b)) continue;\n"
                        "    const int pos = i < 2 ? pos_a : pos_b, gi = i < 2 ? gi_a : gi_b;\n"
                        "    out[{2} * {1} + nt * 8 + 2 * q + (i & 1)] = {3};\n"
                        "  }}\n  }}\n}}\n",
                        d / 8, d,
                        token_rows ? fmt::format("(((i64)pos * ({}) + head) * group + gi)", h)
                                   : std::string("(((i64)head * group + gi) * tokens + pos)"),
                        narrow(out, "o[nt][i] / (i < 2 ? l_a : l_b)"));
    return code;
}

}  // namespace luminal::cuda

#pragma once
// An ExpertGemmKernel as CUDA source (the layout is described in
// expert_gemm_kernel.hpp; the rows it takes, in expert_rows_source.hpp).
// Shared memory: the tile's activations [kGemmRows][kGemmStride] as bf16,
// one buffer per stage where they are copied as stored, else one per part
// (hi, mid and lo; bf16 activations: hi alone); the block's weight rows
// [kGemmColumns][kGemmStride], one buffer per stage; then the experts'
// bitmap. Warp w multiplies columns [16w, 16w + 16) of the block by all
// kGemmRows rows: 4 x 2 accumulator fragments of the m16n8 products. The
// block's warp count must divide 8.
#include <string>

#include "luminal/cuda/expert_gemm_kernel.hpp"
#include "luminal/cuda/expert_rows_source.hpp"
#include "luminal/cuda/gemv_source.hpp"

namespace luminal::cuda {

inline std::string ExpertGemmKernel::source() const {
    using namespace source_detail;
    std::string sizes, mark_decls, scan_decls, stage_decls, row_decls;
    ExpressionPrinter size_exprs(sizes, "c"), mark_exprs(mark_decls, "m"), scan_exprs(scan_decls, "q"), stage_exprs(stage_decls, "a"),
        row_exprs(row_decls, "w");
    const std::string r = size_exprs.print(rows, "0"), e = size_exprs.print(experts, "0"), n = size_exprs.print(outputs, "0"),
                      k = size_exprs.print(depth, "0");
    const std::string mark_at = mark_exprs.print(views[2].index_expression(), "r");
    const std::string scan_at = scan_exprs.print(views[2].index_expression(), "r");
    const std::string x_at = stage_exprs.print(views[0].index_expression(), "z");
    const std::string x_valid = stage_exprs.print(views[0].valid_expression(), "z");
    const std::string w_at = row_exprs.print(views[1].index_expression(), "wz");
    const ExpertRowsSource rows_source{mark_decls, mark_at, scan_decls, scan_at,
                                       fmt::format("(unsigned char*)luminal_dynamic_shared() + {}LL", gemm_stage_bytes(activation_tiles())), kGemmRows,
                                       kGemmColumns};

    const int activation_tile = kGemmRows * kGemmStride, weight_tile = kGemmColumns * kGemmStride;
    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude);
    code += signature(entry(), DType::F32, inputs) + " {\n" +
            dim_declarations({&size_exprs, &mark_exprs, &scan_exprs, &stage_exprs, &row_exprs}) + sizes;
    code += rows_source.prologue(r, e, n, k);
    code += fmt::format("  unsigned short* const a_hi = (unsigned short*)luminal_dynamic_shared();\n"
                        "  unsigned short* const a_mid = a_hi + {0};\n  unsigned short* const a_lo = a_mid + {0};\n"
                        "  unsigned short* const b_tile = a_hi + {1};\n"
                        "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5), g = lane >> 2, q = lane & 3;\n",
                        activation_tile, activation_tiles() * activation_tile);
    // Slice [k, k + kGemmDepth) copied into the buffers of `stage`: the block's weight rows as stored (columns past N
    // and K zeros), a thread's kGemmWeightVectors issued together, then the tile's activations where they are copied
    // too (rows past the tile and K zeros). A copy that is not valid reads nothing; its address stays in bounds anyway.
    const auto copy_slice = [&](std::string_view k_first, std::string_view stage) {
        std::string copies = fmt::format(
            "      for (int first = threadIdx.x; first < {0} * {1}; first += {5} * (int)blockDim.x) {{\n"
            "        #pragma unroll\n        for (int u = 0; u < {5}; ++u) {{\n"
            "          const int i = first + u * (int)blockDim.x, col = i / {1}, part = i % {1};\n"
            "          const i64 n = first_n + col, kk = {6} + part * 8;\n          const bool valid = n < last_n && kk < K;\n"
            "          const i64 wz = (expert * N + (valid ? n : first_n)) * K + (valid ? kk : 0);\n"
            "{2}          if (i < {0} * {1}) luminal_copy_async16(b_tile + ({7}) * {8} + col * {4} + part * 8, in1 + {3}, valid);\n"
            "        }}\n      }}\n",
            kGemmColumns, kGemmDepth / 8, row_decls, w_at, kGemmStride, kGemmWeightVectors, k_first, stage, weight_tile);
        if (copies_activations())
            copies += fmt::format("      for (int i = threadIdx.x; i < {0} * {1}; i += blockDim.x) {{\n"
                                  "        const int t = i / {1}, part = i % {1};\n        const i64 kk = {2} + part * 8;\n"
                                  "        const bool valid = t < tile && kk < K;\n"
                                  "        luminal_copy_async16(a_hi + ({3}) * {4} + t * {5} + part * 8, in0 + (valid ? (i64)picked[done + t] * K + kk : 0), valid);\n"
                                  "      }}\n",
                                  kGemmRows, kGemmDepth / 8, k_first, stage, activation_tile, kGemmStride);
        return copies;
    };
    // Each warp takes one group of 16 columns per pass (one pass with the block's 8 warps; a smaller block, as the
    // host runs it, takes several). The next slice's copies are issued before the current slice's are waited for.
    std::string body = fmt::format("      for (int first_group = 0; first_group < {}; first_group += warps) {{\n"
                                   "      const int group = first_group + warp;\n      float acc[4][2][4];\n"
                                   "      #pragma unroll\n      for (int i = 0; i < 32; ++i) (&acc[0][0][0])[i] = 0.0f;\n",
                                   kGemmColumns / 16);
    body += copy_slice("0", "0") + "      luminal_copy_async_commit();\n      int stage = 0;\n";
    body += fmt::format("      for (i64 k0 = 0; k0 < K; k0 += {0}, stage ^= 1) {{\n      if (k0 + {0} < K) {{\n", kGemmDepth);
    body += copy_slice(fmt::format("k0 + {}", kGemmDepth), "stage ^ 1") + "      }\n      luminal_copy_async_commit();\n";
    // Activations not copied: each split into its bf16 parts through registers (rows past the tile and K are zeros).
    if (!copies_activations())
        body += fmt::format("      for (int i = threadIdx.x; i < {0} * {1}; i += blockDim.x) {{\n"
                            "        const int t = i / {1}, c = i % {1};\n        float v = 0.0f;\n"
                            "        if (t < tile && k0 + c < K) {{\n          const i64 z = (i64)picked[done + t] * K + k0 + c;\n"
                            "{2}          v = {3} != 0 ? {4} : 0.0f;\n        }}\n"
                            "        const unsigned hi = luminal_bf16_bits(v);\n        a_hi[t * {5} + c] = (unsigned short)hi;\n{6}      }}\n",
                            kGemmRows, kGemmDepth, stage_decls, x_valid, widen(inputs[0], fmt::format("in0[{}]", x_at)), kGemmStride,
                            parts() == 1 ? std::string()
                                         : fmt::format("        const float rest = v - __uint_as_float(hi << 16);\n"
                                                       "        const unsigned mid = luminal_bf16_bits(rest);\n"
                                                       "        a_mid[t * {0} + c] = (unsigned short)mid;\n"
                                                       "        a_lo[t * {0} + c] = (unsigned short)luminal_bf16_bits(rest - __uint_as_float(mid << 16));\n",
                                                       kGemmStride));
    body += fmt::format("      luminal_copy_async_wait<1>();\n      __syncthreads();\n"
                        "      const unsigned short* const a_now = a_hi + {0};\n"
                        "      const unsigned short* const b_now = b_tile + stage * {1};\n",
                        copies_activations() ? fmt::format("stage * {}", activation_tile) : std::string("0"), weight_tile);
    // Two k16 steps: each warp's B fragments of its two n8 tiles, then the A fragments of every m16 tile that holds rows
    // of the tile (the tile's count is the block's, so every lane of a warp stops at the same one), part by part.
    body += fmt::format(
        "      #pragma unroll\n      for (int ks = 0; ks < {0}; ks += 16) {{\n        unsigned b[2][2];\n"
        "        #pragma unroll\n        for (int nt = 0; nt < 2; ++nt) {{\n"
        "          const unsigned short* column = b_now + (group * 16 + nt * 8 + g) * {1} + ks + 2 * q;\n"
        "          b[nt][0] = *reinterpret_cast<const unsigned*>(column);\n"
        "          b[nt][1] = *reinterpret_cast<const unsigned*>(column + 8);\n        }}\n"
        "        #pragma unroll\n        for (int mt = 0; mt < 4; ++mt) {{\n          if (mt * 16 >= tile) break;\n"
        "          const int at = (mt * 16 + g) * {1} + ks + 2 * q;\n"
        "          const unsigned short* const parts[3] = {{a_now, a_mid, a_lo}};\n"
        "          #pragma unroll\n          for (int p = 0; p < {2}; ++p) {{\n            const unsigned short* const part = parts[p];\n"
        "            const unsigned a[4] = {{*reinterpret_cast<const unsigned*>(part + at), *reinterpret_cast<const unsigned*>(part + at + 8 * {1}),\n"
        "                                   *reinterpret_cast<const unsigned*>(part + at + 8), *reinterpret_cast<const unsigned*>(part + at + 8 * {1} + 8)}};\n"
        "            #pragma unroll\n            for (int nt = 0; nt < 2; ++nt) luminal_mma_bf16(acc[mt][nt], a, b[nt]);\n          }}\n"
        "        }}\n      }}\n      __syncthreads();\n      }}\n",
        kGemmDepth, kGemmStride, parts());
    // Each accumulator: rows g and g + 8 of its m16 tile, columns 2q and 2q + 1 of its n8 tile.
    body += "      #pragma unroll\n      for (int mt = 0; mt < 4; ++mt)\n"
            "      #pragma unroll\n      for (int nt = 0; nt < 2; ++nt)\n"
            "      #pragma unroll\n      for (int i = 0; i < 4; ++i) {\n"
            "        const int row = mt * 16 + g + 8 * (i / 2);\n"
            "        const i64 n = first_n + group * 16 + nt * 8 + 2 * q + i % 2;\n"
            "        if (row < tile && n < last_n) out[(i64)picked[done + row] * N + n] = acc[mt][nt][i];\n      }\n      }\n";
    code += rows_source.tiles(body);
    return code;
}

}  // namespace luminal::cuda

#pragma once
// A QuantGemvKernel as CUDA source (the thread layout is described in
// quant_gemv_kernel.hpp); the format's block functions come from
// quant_blocks_source.hpp.
#include <string>

#include "luminal/cuda/gemv_source.hpp"
#include "luminal/cuda/quant_blocks_source.hpp"
#include "luminal/cuda/quant_gemv_kernel.hpp"

namespace luminal::cuda {

inline std::string QuantGemvKernel::source() const {
    using namespace source_detail;
    const std::string tag(quant_format_tag(op.format));
    const bool q8 = op.activations == Activations::Q8;
    std::string sizes, index_code;
    ExpressionPrinter size_exprs(sizes, "c"), index_exprs(index_code, "a");
    const std::string s = size_exprs.print(tokens, "0"), at = index_exprs.print(views[0].index_expression(), "z");
    const std::int64_t k = op.cols, groups = op.cols / kQuantBlock;

    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude) + std::string(kQuantPrelude);
    code += signature(entry(), DType::F32, inputs) + " {\n" + dim_declarations({&size_exprs, &index_exprs}) + sizes;
    code += fmt::format("  const i64 S = {}, N = {}LL, K = {}LL, G = {}LL, RB = {}LL, NB = {}LL, TOTAL = N * RB;\n", s, op.rows, k,
                        groups, row_bytes(), op.cols / block_elements(op.format));
    code += fmt::format("  constexpr int BB = {}, GPB = {}, CB = {}, LOADS = {}, TILE = {};\n", io::layout_of(op.format).block_bytes,
                        groups_per_block(), chunk_blocks(), kQuantGemvLoads, tile_tokens);
    code += fmt::format("  __shared__ uint4 luminal_stage[{}][{}];\n", kQuantGemvWarps, kQuantGemvStageBytes / 16);
    code += "  float* const staged = luminal_dynamic_shared();\n";
    if (q8)
        code += "  signed char* const quants = (signed char*)staged;\n  float* const scales = (float*)(quants + TILE * K);\n"
                "  int* const sums = (int*)(scales + TILE * G);\n";
    code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5);\n"
            "  unsigned char* const stage = (unsigned char*)luminal_stage[warp];\n"
            "  for (i64 t0 = 0; t0 < S; t0 += TILE) {\n"
            "    const int tile = (int)(S - t0 < TILE ? S - t0 : TILE);\n    __syncthreads();\n";
    if (q8)
        code += fmt::format("    for (i64 g = threadIdx.x; g < (i64)tile * G; g += blockDim.x) {{\n"
                            "      float x[32];\n      float amax = 0.0f;\n"
                            "      for (int l = 0; l < 32; ++l) {{\n      const i64 z = t0 * K + g * 32 + l;\n{}"
                            "      x[l] = in0[{}];\n      amax = fmaxf(amax, fabsf(x[l]));\n      }}\n"
                            "      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;\n      int sum = 0;\n"
                            "      for (int l = 0; l < 32; ++l) {{\n      const int q = (int)roundf(x[l] * id);\n"
                            "      quants[g * 32 + l] = (signed char)q;\n      sum += q;\n      }}\n"
                            "      scales[g] = d;\n      sums[g] = sum;\n    }}\n",
                            index_code, at);
    else
        code += fmt::format("    for (i64 i = threadIdx.x; i < (i64)tile * K; i += blockDim.x) {{\n      const i64 z = t0 * K + i;\n{}"
                            "      staged[i] = in0[{}];\n    }}\n",
                            index_code, at);
    code += "    __syncthreads();\n"
            "    for (i64 n = (i64)blockIdx.x * warps + warp; n < N; n += (i64)gridDim.x * warps) {\n"
            "      float acc[TILE];\n      #pragma unroll\n      for (int t = 0; t < TILE; ++t) acc[t] = 0.0f;\n"
            "      for (i64 b0 = 0; b0 < NB; b0 += CB) {\n"
            "        const i64 b1 = b0 + CB < NB ? b0 + CB : NB, start = n * RB + b0 * BB, aligned = start & ~(i64)15;\n"
            "        const i64 vectors = (n * RB + b1 * BB - aligned + 15) >> 4;\n"
            "        uint4 v[LOADS];\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u) {\n"
            "          const i64 i = lane + 32 * u, at = aligned + 16 * i;\n"
            "          if (i < vectors) v[u] = at + 16 <= TOTAL ? *reinterpret_cast<const uint4*>(in1 + at) : luminal_tail_vector(in1 + at, TOTAL - at);\n"
            "        }\n        __syncwarp();\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u)\n"
            "          if (lane + 32 * u < vectors) reinterpret_cast<uint4*>(stage)[lane + 32 * u] = v[u];\n"
            "        __syncwarp();\n        const unsigned char* const blocks = stage + (start - aligned);\n"
            "        const int units = (int)(b1 - b0) * GPB;\n"
            "        for (int u = lane; u < units; u += 32) {\n"
            "          const unsigned char* const block = blocks + (u / GPB) * BB;\n"
            "          const int j = u % GPB;\n          const i64 group = (b0 + u / GPB) * GPB + j;\n";
    if (q8)
        code += fmt::format("          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                            "          acc[t] += luminal_{}_dot_q8(block, j, (const int*)(quants + t * K + group * 32), scales[t * G + group], sums[t * G + group]);\n"
                            "          }}\n",
                            tag);
    else
        code += fmt::format("          float w[32];\n          #pragma unroll\n          for (int l = 0; l < 32; ++l) w[l] = luminal_{}_element(block, 32 * j + l);\n"
                            "          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                            "          const float* const a = staged + t * K + group * 32;\n          float sum = acc[t];\n"
                            "          #pragma unroll\n          for (int l = 0; l < 32; ++l) sum = fmaf(w[l], a[l], sum);\n"
                            "          acc[t] = sum;\n          }}\n",
                            tag);
    code += "        }\n      }\n"
            "      #pragma unroll\n      for (int t = 0; t < TILE; ++t)\n"
            "        for (int s = 16; s > 0; s >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], s);\n"
            "      #pragma unroll\n      for (int t = 0; t < TILE; ++t)\n"
            "        if (t < tile && lane == t % 32) out[(t0 + t) * N + n] = acc[t];\n"
            "    }\n  }\n}\n";
    return code;
}

}  // namespace luminal::cuda

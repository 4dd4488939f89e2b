#pragma once
// The block walk of a quantized GemvKernel's source (the layout is described
// in quant_gemv_kernel.hpp): for the warp's row g, each weight's blocks in
// chunks, summed into acc[j][0][t]. The format's block functions come from
// quant_blocks_source.hpp; the rest of the kernel is gemv_source.hpp's.
#include <string>

#include "luminal/cuda/gemv_kernel.hpp"
#include "luminal/cuda/quant_blocks_source.hpp"

namespace luminal::cuda {

inline std::string GemvKernel::quant_walk_source() const {
    const std::string tag(quant_format_tag(quant->format));
    const bool q8 = quant->activations == Activations::Q8;
    const std::int64_t k = quant->cols, groups = k / kQuantBlock, block_bytes = io::layout_of(quant->format).block_bytes;
    const std::int64_t row_bytes = quantized_bytes(quant->format, 1, k), per_block = block_elements(quant->format) / kQuantBlock;
    // Whole blocks per chunk, leaving room for the 16-byte alignment below its start and above its end.
    const std::int64_t chunk_blocks = std::max<std::int64_t>((kQuantGemvStageBytes - 32) / block_bytes, 1);
    std::string code = fmt::format(
        "      {{\n      const i64 n = g, K = {}LL, G = {}LL, RB = {}LL, NB = {}LL, TOTAL = {}LL * RB;\n"
        "      constexpr int BB = {}, GPB = {}, CB = {}, LOADS = {}, TILE = {};\n"
        "      unsigned char* const stage = (unsigned char*)luminal_dynamic_shared() + warp * {}LL;\n",
        k, groups, row_bytes, k / block_elements(quant->format), quant->rows, block_bytes, per_block, chunk_blocks, kQuantGemvLoads,
        tile_tokens, kQuantGemvStageBytes);
    for (std::size_t j = 0; j < weight_inputs.size(); ++j) {
        code += fmt::format("      #pragma unroll\n      for (int t = 0; t < TILE; ++t) acc[{0}][0][t] = 0.0f;\n"
                            "      for (i64 b0 = 0; b0 < NB; b0 += CB) {{\n"
                            "        const i64 b1 = b0 + CB < NB ? b0 + CB : NB, start = n * RB + b0 * BB, aligned = start & ~(i64)15;\n"
                            "        const i64 vectors = (n * RB + b1 * BB - aligned + 15) >> 4;\n"
                            "        uint4 v[LOADS];\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u) {{\n"
                            "          const i64 i = lane + 32 * u, at = aligned + 16 * i;\n"
                            "          if (i < vectors) v[u] = at + 16 <= TOTAL ? *reinterpret_cast<const uint4*>(in{1} + at) : luminal_tail_vector(in{1} + at, TOTAL - at);\n"
                            "        }}\n        __syncwarp();\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u)\n"
                            "          if (lane + 32 * u < vectors) reinterpret_cast<uint4*>(stage)[lane + 32 * u] = v[u];\n"
                            "        __syncwarp();\n        const unsigned char* const blocks = stage + (start - aligned);\n"
                            "        const int units = (int)(b1 - b0) * GPB;\n"
                            "        for (int u = lane; u < units; u += 32) {{\n"
                            "          const unsigned char* const block = blocks + (u / GPB) * BB;\n"
                            "          const int j = u % GPB;\n          const i64 group = (b0 + u / GPB) * GPB + j;\n",
                            j, weight_inputs[j]);
        if (q8)
            code += fmt::format("          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                                "          acc[{0}][0][t] += luminal_{1}_dot_q8(block, j, (const int*)(quants + t * K + group * 32), scales[t * G + group], sums[t * G + group]);\n"
                                "          }}\n",
                                j, tag);
        else
            code += fmt::format("          float w[32];\n          #pragma unroll\n          for (int l = 0; l < 32; ++l) w[l] = luminal_{1}_element(block, 32 * j + l);\n"
                                "          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                                "          const float* const a = activation + t * K + group * 32;\n          float sum = acc[{0}][0][t];\n"
                                "          #pragma unroll\n          for (int l = 0; l < 32; ++l) sum = fmaf(w[l], a[l], sum);\n"
                                "          acc[{0}][0][t] = sum;\n          }}\n",
                                j, tag);
        code += "        }\n      }\n";
    }
    return code + "      }\n";
}

}  // namespace luminal::cuda

#pragma once
// The block walk of a quantized product's source (the layout is described in
// quant_gemv_kernel.hpp), shared by the decode GEMV and the expert GEMV: for
// one weight row, each weight's blocks in chunks, summed into acc(j)[t] for
// the `tile` staged activation rows; and the rounding of those rows to 8-bit
// blocks. The format's block functions come from quant_blocks_source.hpp.
// Both expect in scope: lane, warp, tile, activation (f32 rows of K) and, for
// Activations::Q8, quants, scales and sums; the walk's stage is the warp's
// kQuantGemvStageBytes at the start of dynamic shared memory.
#include <functional>
#include <span>
#include <string>

#include "luminal/cuda/quant_blocks_source.hpp"
#include "luminal/cuda/quant_gemv_kernel.hpp"

namespace luminal::cuda {

// Groups of 32 staged activations of the tile's rows to int8 quants, their scale and their quant sum.
inline std::string q8_rounding_source(std::int64_t groups_per_row) {
    return fmt::format("    for (i64 g = threadIdx.x; g < (i64)tile * {0}; g += blockDim.x) {{\n"
                       "      const float* const x = activation + g * 32;\n      float amax = 0.0f;\n"
                       "      for (int l = 0; l < 32; ++l) amax = fmaxf(amax, fabsf(x[l]));\n"
                       "      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;\n      int sum = 0;\n"
                       "      for (int l = 0; l < 32; ++l) {{\n      const int q = (int)roundf(x[l] * id);\n"
                       "      quants[g * 32 + l] = (signed char)q;\n      sum += q;\n      }}\n"
                       "      scales[g] = d;\n      sums[g] = sum;\n    }}\n    __syncthreads();\n",
                       groups_per_row);
}

// Weight row `row` (a source expression) of matrices of `matrix_rows` rows stored back to back in each input of
// `inputs`, accumulated into acc(j)[t] for input j.
inline std::string quant_walk_source(const QuantizedMatmulOp& quant, std::int64_t matrix_rows, std::string_view row,
                                     std::span<const std::uint16_t> inputs, int tile_rows,
                                     const std::function<std::string(std::size_t)>& acc) {
    const std::string tag(quant_format_tag(quant.format));
    const bool q8 = quant.activations == Activations::Q8;
    const std::int64_t k = quant.cols, groups = k / kQuantBlock, block_bytes = io::layout_of(quant.format).block_bytes;
    const std::int64_t row_bytes = quantized_bytes(quant.format, 1, k), per_block = block_elements(quant.format) / kQuantBlock;
    // Whole blocks per chunk, leaving room for the 16-byte alignment below its start and above its end.
    const std::int64_t chunk_blocks = std::max<std::int64_t>((kQuantGemvStageBytes - 32) / block_bytes, 1);
    // A vector past the matrices' last byte is read byte by byte. Where they fill whole vectors (every format
    // at the models' sizes) none is: without that path each lane's LOADS vectors are issued back to back,
    // where each sat beside a branch to the tail (and the SASS facts, read in address order, met the tail first).
    const bool whole_vectors = (matrix_rows * row_bytes) % 16 == 0;
    auto vector_load = [&](std::uint16_t input) {
        return whole_vectors ? fmt::format("*reinterpret_cast<const uint4*>(in{} + at)", input)
                             : fmt::format("at + 16 <= TOTAL ? *reinterpret_cast<const uint4*>(in{0} + at) : luminal_tail_vector(in{0} + at, TOTAL - at)", input);
    };
    std::string code = fmt::format(
        "      {{\n      const i64 wr = {}, K = {}LL, G = {}LL, RB = {}LL, NB = {}LL, TOTAL = {}LL * RB;\n"
        "      constexpr int BB = {}, GPB = {}, CB = {}, LOADS = {}, TILE = {};\n"
        "      unsigned char* const stage = (unsigned char*)luminal_dynamic_shared() + warp * {}LL;\n",
        row, k, groups, row_bytes, k / block_elements(quant.format), matrix_rows, block_bytes, per_block, chunk_blocks,
        kQuantGemvLoads, tile_rows, kQuantGemvStageBytes);
    for (std::size_t j = 0; j < inputs.size(); ++j) {
        code += fmt::format("      #pragma unroll\n      for (int t = 0; t < TILE; ++t) {0}[t] = 0.0f;\n"
                            "      for (i64 b0 = 0; b0 < NB; b0 += CB) {{\n"
                            "        const i64 b1 = b0 + CB < NB ? b0 + CB : NB, start = wr * RB + b0 * BB, aligned = start & ~(i64)15;\n"
                            "        const i64 vectors = (wr * RB + b1 * BB - aligned + 15) >> 4;\n"
                            "        uint4 v[LOADS];\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u) {{\n"
                            "          const i64 i = lane + 32 * u, at = aligned + 16 * i;\n"
                            "          if (i < vectors) v[u] = {1};\n"
                            "        }}\n        __syncwarp();\n        #pragma unroll\n        for (int u = 0; u < LOADS; ++u)\n"
                            "          if (lane + 32 * u < vectors) reinterpret_cast<uint4*>(stage)[lane + 32 * u] = v[u];\n"
                            "        __syncwarp();\n        const unsigned char* const blocks = stage + (start - aligned);\n"
                            "        const int units = (int)(b1 - b0) * GPB;\n"
                            "        for (int u = lane; u < units; u += 32) {{\n"
                            "          const unsigned char* const block = blocks + (u / GPB) * BB;\n"
                            "          const int j = u % GPB;\n          const i64 group = (b0 + u / GPB) * GPB + j;\n",
                            acc(j), vector_load(inputs[j]));
        if (q8)
            code += fmt::format("          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                                "          {0}[t] += luminal_{1}_dot_q8(block, j, (const int*)(quants + t * K + group * 32), scales[t * G + group], sums[t * G + group]);\n"
                                "          }}\n",
                                acc(j), tag);
        else
            code += fmt::format("          float w[32];\n          #pragma unroll\n          for (int l = 0; l < 32; ++l) w[l] = luminal_{1}_element(block, 32 * j + l);\n"
                                "          #pragma unroll\n          for (int t = 0; t < TILE; ++t) {{\n          if (t >= tile) break;\n"
                                "          const float* const a = activation + t * K + group * 32;\n          float sum = {0}[t];\n"
                                "          #pragma unroll\n          for (int l = 0; l < 32; ++l) sum = fmaf(w[l], a[l], sum);\n"
                                "          {0}[t] = sum;\n          }}\n",
                                acc(j), tag);
        code += "        }\n      }\n";
    }
    return code + "      }\n";
}

}  // namespace luminal::cuda

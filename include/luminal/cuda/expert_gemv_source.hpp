#pragma once
// An ExpertGemvKernel as CUDA source (the thread layout is described in
// expert_gemv_kernel.hpp; the rows it takes, in expert_rows_source.hpp).
#include <string>

#include "luminal/cuda/expert_gemv_kernel.hpp"
#include "luminal/cuda/expert_rows_source.hpp"
#include "luminal/cuda/gemv_source.hpp"
#include "luminal/cuda/quant_gemv_source.hpp"

namespace luminal::cuda {

inline std::string ExpertGemvKernel::source() const {
    using namespace source_detail;
    const int tile = tile_rows, v = vector_width();
    const DType x_type = inputs[0], w_type = inputs[1];
    std::string sizes, mark_decls, scan_decls, stage_decls, row_decls, element_decls;
    ExpressionPrinter size_exprs(sizes, "c"), mark_exprs(mark_decls, "m"), scan_exprs(scan_decls, "q"),
        stage_exprs(stage_decls, "a"), row_exprs(row_decls, "w"), element_exprs(element_decls, "s");
    const std::string r = size_exprs.print(rows, "0"), e = size_exprs.print(experts, "0"),
                      n = size_exprs.print(outputs, "0"), k = size_exprs.print(depth, "0");
    const std::string mark_at = mark_exprs.print(views[2].index_expression(), "r");
    const std::string scan_at = scan_exprs.print(views[2].index_expression(), "r");
    const std::string x_at = stage_exprs.print(views[0].index_expression(), "z");
    const std::string x_valid = stage_exprs.print(views[0].valid_expression(), "z");
    const std::string row_at = vector ? row_exprs.print(views[1].index_expression(), "wz") : std::string();
    const std::string element_at = vector || quant ? std::string() : element_exprs.print(views[1].index_expression(), "wz");
    const bool q8 = quant && quant->activations == Activations::Q8;

    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude) + (quant ? std::string(kQuantPrelude) : std::string());
    code += signature(entry(), DType::F32, inputs) + " {\n" +
            dim_declarations({&size_exprs, &mark_exprs, &scan_exprs, &stage_exprs, &row_exprs, &element_exprs}) + sizes;
    ExpertRowsSource rows_source{mark_decls, mark_at, scan_decls, scan_at,
                                 fmt::format("(unsigned char*)activation + {}LL", static_cast<std::size_t>(tile) * staged_bytes()), tile,
                                 static_cast<int>(kExpertRowsPerBlock)};
    code += fmt::format("  float* const activation = luminal_dynamic_shared() + {};\n", quant ? kExpertStageBytes / 4 : 0);
    code += rows_source.prologue(r, e, n, k);
    if (q8)  // the tile's 8-bit blocks after its f32 rows: quants, then each group's scale and quant sum
        code += fmt::format("  signed char* const quants = (signed char*)(activation + {0} * K);\n"
                            "  float* const scales = (float*)(quants + {0} * K);\n  int* const sums = (int*)(scales + {0} * (K / 32));\n",
                            tile);
    code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5);\n";
    std::string body = fmt::format("      for (i64 i = threadIdx.x; i < (i64)tile * K; i += blockDim.x) {{\n"
                                   "        const int t = (int)(i / K);\n        const i64 z = (i64)picked[done + t] * K + (i - (i64)t * K);\n"
                                   "{0}        activation[i] = {1} != 0 ? {2} : 0.0f;\n      }}\n      __syncthreads();\n",
                                   stage_decls, x_valid, widen(x_type, fmt::format("in0[{}]", x_at)));
    if (q8) body += q8_rounding_source(quant->cols / kQuantBlock);
    body += fmt::format("      for (i64 n = first_n + warp; n < last_n; n += warps) {{\n      float acc[{0}];\n"
                        "      #pragma unroll\n      for (int t = 0; t < {0}; ++t) acc[t] = 0.0f;\n",
                        tile);
    if (quant) {
        static constexpr std::uint16_t kWeightInput[] = {1};
        body += quant_walk_source(*quant, *experts.as_constant() * quant->rows, "expert * N + n", kWeightInput, tile,
                                  [](std::size_t) { return std::string("acc"); });
    } else if (vector) {
        const std::string dot = w_type == DType::BF16 ? "luminal_dot_bf16" : w_type == DType::F16 ? "luminal_dot_f16" : "luminal_dot_f32";
        body += fmt::format("      const i64 wz = (expert * N + n) * K;\n{0}      const {1}* const row = in1 + {2};\n"
                            "      for (i64 k0 = (i64)lane * {3}; k0 < K; k0 += {4}LL) {{\n        uint4 w[{5}];\n"
                            "        #pragma unroll\n        for (int u = 0; u < {5}; ++u) {{\n"
                            "        const i64 k = k0 + (i64)u * {6};\n"
                            "        w[u] = k < K ? *reinterpret_cast<const uint4*>(row + k) : uint4{{0u, 0u, 0u, 0u}};\n        }}\n"
                            "        #pragma unroll\n        for (int u = 0; u < {5}; ++u) {{\n"
                            "        const i64 k = k0 + (i64)u * {6};\n        if (k >= K) break;\n"
                            "        #pragma unroll\n        for (int t = 0; t < {7}; ++t) {{\n        if (t >= tile) break;\n"
                            "        const float4* a = reinterpret_cast<const float4*>(activation + (i64)t * K + k);\n",
                            row_decls, storage_type(w_type), row_at, v, 32 * v * kExpertUnroll, kExpertUnroll, 32 * v, tile);
        body += v == 8 ? fmt::format("        acc[t] = {}(w[u], a[0], a[1], acc[t]);\n", dot)
                       : fmt::format("        acc[t] = {}(w[u], a[0], acc[t]);\n", dot);
        body += "        }\n        }\n      }\n";
    } else {
        body += fmt::format("      for (i64 k = lane; k < K; k += 32) {{\n        const i64 wz = (expert * N + n) * K + k;\n{0}"
                            "        const float weight = {1};\n"
                            "        #pragma unroll\n        for (int t = 0; t < {2}; ++t)\n"
                            "        if (t < tile) acc[t] = fmaf(activation[(i64)t * K + k], weight, acc[t]);\n      }}\n",
                            element_decls, widen(w_type, fmt::format("in1[{}]", element_at)), tile);
    }
    // A tile's count is the same in every lane of the warp, so the butterflies stop at it together.
    body += fmt::format("      #pragma unroll\n      for (int t = 0; t < {0}; ++t) {{\n      if (t >= tile) break;\n"
                        "      for (int s = 16; s > 0; s >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], s);\n"
                        "      if (lane == t) out[(i64)picked[done + t] * N + n] = acc[t];\n      }}\n      }}\n",
                        tile);
    code += rows_source.tiles(body);
    return code;
}

}  // namespace luminal::cuda

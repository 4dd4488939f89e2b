#pragma once
// An ExpertGemvKernel as CUDA source (the thread layout is described in
// expert_gemv_kernel.hpp; the rows it takes, in expert_rows_source.hpp).
#include <deque>
#include <string>
#include <vector>

#include "luminal/cuda/expert_gemv_kernel.hpp"
#include "luminal/cuda/expert_rows_source.hpp"
#include "luminal/cuda/gemv_source.hpp"
#include "luminal/cuda/quant_gemv_source.hpp"
#include "luminal/cuda/row_kernel_source.hpp"

namespace luminal::cuda {

inline std::string ExpertGemvKernel::source() const {
    using namespace source_detail;
    const int tile = tile_rows, v = vector_width();
    const DType x_type = inputs[0], w_type = inputs[1];
    const std::size_t m = static_cast<std::size_t>(weights), picks = experts_input();
    std::string sizes, mark_decls, scan_decls, stage_decls;
    ExpressionPrinter size_exprs(sizes, "c"), mark_exprs(mark_decls, "m"), scan_exprs(scan_decls, "q"), stage_exprs(stage_decls, "a");
    // Each weight's row start (vector rows) or element (others), with printers of their own.
    std::deque<std::string> weight_decls;
    std::deque<ExpressionPrinter> weight_printers;
    std::vector<std::string> weight_at;
    for (std::size_t j = 0; j < m && !quant; ++j) {
        weight_decls.emplace_back();
        weight_printers.emplace_back(weight_decls.back(), fmt::format("w{}e", j));
        weight_at.push_back(weight_printers.back().print(views[1 + j].index_expression(), "wz"));
    }
    PrintedBodies printed;
    const std::string epilogue_code = m > 1 ? printed.print(epilogue, "o", "z") : std::string();
    const std::string r = size_exprs.print(rows, "0"), e = size_exprs.print(experts, "0"),
                      n = size_exprs.print(outputs, "0"), k = size_exprs.print(depth, "0");
    const std::string mark_at = mark_exprs.print(views[picks].index_expression(), "r");
    const std::string scan_at = scan_exprs.print(views[picks].index_expression(), "r");
    const std::string x_at = stage_exprs.print(views[0].index_expression(), "z");
    const std::string x_valid = stage_exprs.print(views[0].valid_expression(), "z");
    const bool q8 = quant && quant->activations == Activations::Q8;
    std::vector<const ExpressionPrinter*> used{&size_exprs, &mark_exprs, &scan_exprs, &stage_exprs};
    for (const ExpressionPrinter& p : weight_printers) used.push_back(&p);
    for (const ExpressionPrinter& p : printed.printers) used.push_back(&p);

    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude) + (quant ? std::string(kQuantPrelude) : std::string());
    code += signature(entry(), DType::F32, inputs) + " {\n" + dim_declarations(used) + sizes;
    ExpertRowsSource rows_source{mark_decls, mark_at, scan_decls, scan_at,
                                 fmt::format("(unsigned char*)activation + {}LL", static_cast<std::size_t>(tile) * staged_bytes()), tile,
                                 static_cast<int>(kExpertRowsPerBlock), fmt::format("in{}", picks)};
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
    body += "      for (i64 n = first_n + warp; n < last_n; n += warps) {\n";
    for (std::size_t j = 0; j < m; ++j)
        body += fmt::format("      float acc{0}[{1}];\n      #pragma unroll\n      for (int t = 0; t < {1}; ++t) acc{0}[t] = 0.0f;\n", j, tile);
    if (quant) {
        std::vector<std::uint16_t> weight_inputs;
        for (std::size_t j = 0; j < m; ++j) weight_inputs.push_back(static_cast<std::uint16_t>(1 + j));
        body += quant_walk_source(*quant, *experts.as_constant() * quant->rows, "expert * N + n", weight_inputs, tile,
                                  [](std::size_t j) { return fmt::format("acc{}", j); });
    } else if (vector) {
        const std::string dot = w_type == DType::BF16 ? "luminal_dot_bf16" : w_type == DType::F16 ? "luminal_dot_f16" : "luminal_dot_f32";
        body += "      const i64 wz = (expert * N + n) * K;\n";
        for (std::size_t j = 0; j < m; ++j)
            body += weight_decls[j] + fmt::format("      const {}* const row{} = in{} + {};\n", storage_type(w_type), j, 1 + j, weight_at[j]);
        body += fmt::format("      for (i64 k0 = (i64)lane * {0}; k0 < K; k0 += {1}LL) {{\n", v, 32 * v * kExpertUnroll);
        body += fmt::format("        uint4 w[{0}][{1}];\n        #pragma unroll\n        for (int u = 0; u < {1}; ++u) {{\n"
                            "        const i64 k = k0 + (i64)u * {2};\n",
                            m, kExpertUnroll, 32 * v);
        for (std::size_t j = 0; j < m; ++j)
            body += fmt::format("        w[{0}][u] = k < K ? *reinterpret_cast<const uint4*>(row{0} + k) : uint4{{0u, 0u, 0u, 0u}};\n", j);
        body += fmt::format("        }}\n        #pragma unroll\n        for (int u = 0; u < {0}; ++u) {{\n"
                            "        const i64 k = k0 + (i64)u * {1};\n        if (k >= K) break;\n"
                            "        #pragma unroll\n        for (int t = 0; t < {2}; ++t) {{\n        if (t >= tile) break;\n"
                            "        const float4* a = reinterpret_cast<const float4*>(activation + (i64)t * K + k);\n",
                            kExpertUnroll, 32 * v, tile);
        for (std::size_t j = 0; j < m; ++j)
            body += v == 8 ? fmt::format("        acc{0}[t] = {1}(w[{0}][u], a[0], a[1], acc{0}[t]);\n", j, dot)
                           : fmt::format("        acc{0}[t] = {1}(w[{0}][u], a[0], acc{0}[t]);\n", j, dot);
        body += "        }\n        }\n      }\n";
    } else {
        body += "      for (i64 k = lane; k < K; k += 32) {\n        const i64 wz = (expert * N + n) * K + k;\n";
        for (std::size_t j = 0; j < m; ++j)
            body += weight_decls[j] + fmt::format("        const float weight{} = {};\n", j, widen(w_type, fmt::format("in{}[{}]", 1 + j, weight_at[j])));
        body += fmt::format("        #pragma unroll\n        for (int t = 0; t < {}; ++t) {{\n        if (t >= tile) break;\n", tile);
        for (std::size_t j = 0; j < m; ++j)
            body += fmt::format("        acc{0}[t] = fmaf(activation[(i64)t * K + k], weight{0}, acc{0}[t]);\n", j);
        body += "        }\n      }\n";
    }
    // A tile's count is the same in every lane of the warp, so the butterflies stop at it together.
    body += fmt::format("      #pragma unroll\n      for (int t = 0; t < {0}; ++t) {{\n      if (t >= tile) break;\n", tile);
    for (std::size_t j = 0; j < m; ++j)
        body += fmt::format("      for (int s = 16; s > 0; s >>= 1) acc{0}[t] += __shfl_xor_sync(0xffffffffu, acc{0}[t], s);\n", j);
    body += "      if (lane == t) {\n      const i64 z = (i64)picked[done + t] * N + n;\n";
    if (m == 1) {
        body += "      out[z] = acc0[t];\n";
    } else {
        for (std::size_t j = 0; j < m; ++j) body += fmt::format("      const float stage{0} = acc{0}[t];\n", j);
        body += epilogue_code + fmt::format("      out[z] = {};\n", convert(epilogue.steps.back().dtype, DType::F32,
                                                                       fmt::format("v{}", epilogue.steps.size() - 1)));
    }
    body += "      }\n      }\n      }\n";
    code += rows_source.tiles(body);
    return code;
}

}  // namespace luminal::cuda

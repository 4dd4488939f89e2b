#pragma once
// A GemvKernel as CUDA source (the thread layout is described in
// gemv_kernel.hpp). Weights are read as 16-byte vectors (8 bf16/f16 or 4
// f32 values), each lane keeping `unroll` of them per row in flight before it
// multiplies; the activation rows come from dynamic shared memory as float4s.
#include <deque>
#include <string>

#include "luminal/cuda/gemv_kernel.hpp"
#include "luminal/cuda/quant_blocks_source.hpp"
#include "luminal/cuda/quant_gemv_source.hpp"
#include "luminal/cuda/row_kernel_source.hpp"

namespace luminal::cuda {

// Products of a 16-byte weight vector with the activation values beside it,
// a warp's tensor-core product of bf16 tiles (mma.sync m16n8k16, f32
// accumulation), a float rounded to bf16 bits (nearest even; the values
// rounded are finite), the block's dynamic shared memory, and 16-byte copies
// from global to shared memory that bypass registers (cp.async: zeros where
// not valid, committed as a group, waited for until at most `pending` newer
// groups are in flight), so a tile's loads stay in flight whatever order the
// compiler gives the code around them (the host shim gives its own shared
// memory, product and copies).
inline constexpr std::string_view kGemvPrelude = R"(#ifndef LUMINAL_HOST_SHIM
__device__ __forceinline__ float* luminal_dynamic_shared() { extern __shared__ __align__(16) float luminal_dynamic[]; return luminal_dynamic; }
__device__ __forceinline__ void luminal_mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void luminal_copy_async16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"((unsigned)__cvta_generic_to_shared(shared)), "l"(global),
               "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void luminal_copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int pending>
__device__ __forceinline__ void luminal_copy_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(pending) : "memory"); }
#endif
__device__ __forceinline__ unsigned luminal_bf16_bits(float f) {
  const unsigned u = __float_as_uint(f);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ float luminal_dot_bf16(uint4 w, float4 a, float4 b, float acc) {
  acc = fmaf(__uint_as_float(w.x << 16), a.x, acc); acc = fmaf(__uint_as_float(w.x & 0xffff0000u), a.y, acc);
  acc = fmaf(__uint_as_float(w.y << 16), a.z, acc); acc = fmaf(__uint_as_float(w.y & 0xffff0000u), a.w, acc);
  acc = fmaf(__uint_as_float(w.z << 16), b.x, acc); acc = fmaf(__uint_as_float(w.z & 0xffff0000u), b.y, acc);
  acc = fmaf(__uint_as_float(w.w << 16), b.z, acc); acc = fmaf(__uint_as_float(w.w & 0xffff0000u), b.w, acc);
  return acc;
}
__device__ __forceinline__ float luminal_half(unsigned bits) { return __half2float(__ushort_as_half((unsigned short)bits)); }
__device__ __forceinline__ float luminal_dot_f16(uint4 w, float4 a, float4 b, float acc) {
  acc = fmaf(luminal_half(w.x & 0xffffu), a.x, acc); acc = fmaf(luminal_half(w.x >> 16), a.y, acc);
  acc = fmaf(luminal_half(w.y & 0xffffu), a.z, acc); acc = fmaf(luminal_half(w.y >> 16), a.w, acc);
  acc = fmaf(luminal_half(w.z & 0xffffu), b.x, acc); acc = fmaf(luminal_half(w.z >> 16), b.y, acc);
  acc = fmaf(luminal_half(w.w & 0xffffu), b.z, acc); acc = fmaf(luminal_half(w.w >> 16), b.w, acc);
  return acc;
}
__device__ __forceinline__ float luminal_dot_f32(uint4 w, float4 a, float acc) {
  acc = fmaf(__uint_as_float(w.x), a.x, acc); acc = fmaf(__uint_as_float(w.y), a.y, acc);
  acc = fmaf(__uint_as_float(w.z), a.z, acc); acc = fmaf(__uint_as_float(w.w), a.w, acc);
  return acc;
}
)";

inline std::string GemvKernel::source() const {
    using namespace source_detail;
    const int rows_per_warp = layout.rows, unroll = layout.unroll, tile = tile_tokens;
    const std::size_t m = weight_inputs.size();
    const DType weight_type = inputs[weight_inputs[0]];
    const int v = vector_width(0);
    std::string sizes;
    ExpressionPrinter size_exprs(sizes, "c");
    const std::string s = size_exprs.print(tokens, "0"), n = size_exprs.print(rows, "0"), k = size_exprs.print(depth, "0");
    PrintedBodies printed;
    const std::string stages_code = row_stages_source(stages, true, k, printed);
    const std::string& activation_code = printed.print(activation, "a", "z");
    const std::string& epilogue_code = printed.print(epilogue, "o", "z");
    std::deque<std::string> row_decls;
    std::deque<ExpressionPrinter> row_printers;
    std::vector<std::string> row_starts;
    for (std::size_t j = 0; j < m; ++j) {
        row_decls.emplace_back();
        row_printers.emplace_back(row_decls.back(), fmt::format("w{}e", j));
        row_starts.push_back(row_printers.back().print(weight_views[j].index_expression(), "wz"));
    }
    std::vector<const ExpressionPrinter*> used{&size_exprs};
    for (const ExpressionPrinter& p : printed.printers) used.push_back(&p);
    for (const ExpressionPrinter& p : row_printers) used.push_back(&p);

    std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude) + (quant ? std::string(kQuantPrelude) : std::string());
    const std::string declared = signature(entry(), out, inputs);
    code += block_bound_declaration(declared) + declared + " {\n" + dim_declarations(used) + sizes;
    // Quantized, the warps' chunk stages come first in dynamic shared memory (static shared memory is
    // 48 KiB for all the members of a launch group).
    code += fmt::format("  float* const activation = luminal_dynamic_shared() + {};\n  __shared__ float partial_f[32];\n"
                        "  __shared__ i64 partial_i[32];\n",
                        quant ? kGemvWarps * kQuantGemvStageBytes / 4 : 0);
    const bool q8 = quant && quant->activations == Activations::Q8;
    if (q8)  // the 8-bit blocks after the f32 rows: quants, then each group's scale and quant sum
        code += fmt::format("  signed char* const quants = (signed char*)(activation + {0} * {1});\n"
                            "  float* const scales = (float*)(quants + {0} * {1});\n  int* const sums = (int*)(scales + {0} * {2});\n",
                            tile, k, quant->cols / kQuantBlock);
    code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5);\n";
    code += fmt::format("  for (i64 t0 = 0; t0 < {0}; t0 += {1}) {{\n    const int tile = (int)({0} - t0 < {1} ? {0} - t0 : {1});\n"
                        "    __syncthreads();\n    for (int t = 0; t < tile; ++t) {{\n    const i64 base = (t0 + t) * {2};\n",
                        s, tile, k);
    code += stages_code;
    // The activation is staged with several loads in flight per thread (one per trip would be a serial chain).
    code += fmt::format("    #pragma unroll 4\n    for (i64 r = threadIdx.x; r < {0}; r += blockDim.x) {{\n    const i64 z = base + r;\n{1}"
                        "    activation[(i64)t * {0} + r] = v{2};\n    }}\n    }}\n    __syncthreads();\n",
                        k, activation_code, activation.steps.size() - 1);
    if (q8) code += q8_rounding_source(quant->cols / kQuantBlock);
    code += fmt::format("    for (i64 g = (i64)blockIdx.x * warps + warp; g * {0} < {1}; g += (i64)gridDim.x * warps) {{\n",
                        rows_per_warp, n);
    code += fmt::format("      float acc[{}][{}][{}];\n", m, rows_per_warp, tile);
    if (quant) {
        code += quant_walk_source(*quant, quant->rows, "g", weight_inputs, tile_tokens,
                                  [](std::size_t j) { return fmt::format("acc[{}][0]", j); });
    } else {
        code += fmt::format("      const {}* row[{}][{}];\n", storage_type(weight_type), m, rows_per_warp);
        code += fmt::format("      #pragma unroll\n      for (int r = 0; r < {0}; ++r) {{\n      const i64 n = g * {0} + r;\n"
                            "      const i64 wz = (n < {1} ? n : 0) * {2};\n",
                            rows_per_warp, n, k);
        for (std::size_t j = 0; j < m; ++j) {
            code += row_decls[j];
            code += fmt::format("      row[{}][r] = in{} + {};\n      for (int t = 0; t < {}; ++t) acc[{}][r][t] = 0.0f;\n", j,
                                weight_inputs[j], row_starts[j], tile, j);
        }
        code += "      }\n";
        // The trips every lane completes first, with no bounds in them: ptxas then issues all of a lane's
        // weight loads before the first product waits on one (a bound per load let it wait after the
        // first). The rows past the last are read as row 0 (wz above) and never written.
        const int stride = 32 * v * unroll;
        code += fmt::format("      const i64 whole = {0} / {1}LL * {1}LL;\n", k, stride);
        const std::string dot = weight_type == DType::BF16 ? "luminal_dot_bf16" : weight_type == DType::F16 ? "luminal_dot_f16" : "luminal_dot_f32";
        auto walk = [&](bool bounded) {
            code += bounded ? fmt::format("      for (i64 k0 = whole + (i64)lane * {0}; k0 < {1}; k0 += {2}LL) {{\n", v, k, stride)
                            : fmt::format("      for (i64 k0 = (i64)lane * {0}; k0 < whole; k0 += {1}LL) {{\n", v, stride);
            code += fmt::format("        uint4 w[{}][{}][{}];\n", m, rows_per_warp, unroll);
            code += fmt::format("        #pragma unroll\n        for (int u = 0; u < {0}; ++u) {{\n        const i64 k = k0 + (i64)u * {1};\n"
                                "        #pragma unroll\n        for (int r = 0; r < {2}; ++r) {{\n",
                                unroll, 32 * v, rows_per_warp);
            if (bounded) code += fmt::format("        const bool live = k < {} && g * {} + r < {};\n", k, rows_per_warp, n);
            for (std::size_t j = 0; j < m; ++j)
                code += bounded ? fmt::format("        w[{0}][r][u] = live ? *reinterpret_cast<const uint4*>(row[{0}][r] + k) : uint4{{0u, 0u, 0u, 0u}};\n", j)
                                : fmt::format("        w[{0}][r][u] = *reinterpret_cast<const uint4*>(row[{0}][r] + k);\n", j);
            code += "        }\n        }\n";
            code += fmt::format("        #pragma unroll\n        for (int u = 0; u < {0}; ++u) {{\n        const i64 k = k0 + (i64)u * {1};\n", unroll, 32 * v);
            if (bounded) code += fmt::format("        if (k >= {}) break;\n", k);
            code += fmt::format("        #pragma unroll\n        for (int t = 0; t < {0}; ++t) {{\n"
                                "        if (t >= tile) break;\n        const float4* a = reinterpret_cast<const float4*>(activation + (i64)t * {1} + k);\n",
                                tile, k);
            code += v == 8 ? "        const float4 lo = a[0], hi = a[1];\n" : "        const float4 lo = a[0];\n";
            code += fmt::format("        #pragma unroll\n        for (int r = 0; r < {}; ++r) {{\n", rows_per_warp);
            for (std::size_t j = 0; j < m; ++j)
                code += v == 8 ? fmt::format("        acc[{0}][r][t] = {1}(w[{0}][r][u], lo, hi, acc[{0}][r][t]);\n", j, dot)
                               : fmt::format("        acc[{0}][r][t] = {1}(w[{0}][r][u], lo, acc[{0}][r][t]);\n", j, dot);
            code += "        }\n        }\n        }\n      }\n";
        };
        walk(false);
        walk(true);
    }
    code += fmt::format("      #pragma unroll\n      for (int r = 0; r < {}; ++r)\n      #pragma unroll\n      for (int t = 0; t < {}; ++t) {{\n",
                        rows_per_warp, tile);
    for (std::size_t j = 0; j < m; ++j)
        code += fmt::format("      for (int s = 16; s > 0; s >>= 1) acc[{0}][r][t] += __shfl_xor_sync(0xffffffffu, acc[{0}][r][t], s);\n", j);
    code += "      }\n";
    code += fmt::format("      #pragma unroll\n      for (int t = 0; t < {0}; ++t)\n      #pragma unroll\n      for (int r = 0; r < {1}; ++r) {{\n"
                        "      const i64 n = g * {1} + r;\n      if (t < tile && n < {2} && lane == (t * {1} + r) % 32) {{\n"
                        "      const i64 z = (t0 + t) * {2} + n;\n",
                        tile, rows_per_warp, n);
    for (std::size_t j = 0; j < m; ++j) code += fmt::format("      const float stage{0} = acc[{0}][r][t];\n", j);
    const DType last = epilogue.steps.back().dtype;
    code += epilogue_code;
    code += fmt::format("      out[z] = {};\n      }}\n      }}\n    }}\n  }}\n}}\n",
                        narrow(out, convert(last, out, fmt::format("v{}", epilogue.steps.size() - 1))));
    return code;
}

}  // namespace luminal::cuda


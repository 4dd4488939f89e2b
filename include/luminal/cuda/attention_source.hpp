#pragma once
// An AttentionKernel as CUDA source (the layout is in attention_kernel.hpp).
#include <string>

#include "luminal/cuda/attention_kernel.hpp"
#include "luminal/cuda/kernel_source.hpp"

namespace luminal::cuda {

// A 16-byte chunk of keys or values as floats.
inline constexpr std::string_view kAttentionPrelude = R"(__device__ __forceinline__ void luminal_unpack_bf16(uint4 w, float* x) {
  x[0] = __uint_as_float(w.x << 16); x[1] = __uint_as_float(w.x & 0xffff0000u);
  x[2] = __uint_as_float(w.y << 16); x[3] = __uint_as_float(w.y & 0xffff0000u);
  x[4] = __uint_as_float(w.z << 16); x[5] = __uint_as_float(w.z & 0xffff0000u);
  x[6] = __uint_as_float(w.w << 16); x[7] = __uint_as_float(w.w & 0xffff0000u);
}
__device__ __forceinline__ float luminal_half_of(unsigned bits) { return __half2float(__ushort_as_half((unsigned short)bits)); }
__device__ __forceinline__ void luminal_unpack_f16(uint4 w, float* x) {
  x[0] = luminal_half_of(w.x & 0xffffu); x[1] = luminal_half_of(w.x >> 16); x[2] = luminal_half_of(w.y & 0xffffu); x[3] = luminal_half_of(w.y >> 16);
  x[4] = luminal_half_of(w.z & 0xffffu); x[5] = luminal_half_of(w.z >> 16); x[6] = luminal_half_of(w.w & 0xffffu); x[7] = luminal_half_of(w.w >> 16);
}
__device__ __forceinline__ void luminal_unpack_f32(uint4 w, float* x) {
  x[0] = __uint_as_float(w.x); x[1] = __uint_as_float(w.y); x[2] = __uint_as_float(w.z); x[3] = __uint_as_float(w.w);
}
// Folds state (m2, l2) into (m, l), returning the factors that scale each side's values.
__device__ __forceinline__ void luminal_merge(float& m, float& l, float m2, float l2, float& mine, float& theirs) {
  const float top = fmaxf(m, m2);
  mine = m == -__int_as_float(0x7f800000) ? 0.0f : expf(m - top);
  theirs = m2 == -__int_as_float(0x7f800000) ? 0.0f : expf(m2 - top);
  l = l * mine + l2 * theirs;
  m = top;
}
)";

inline std::string AttentionKernel::source() const {
    using namespace source_detail;
    const int vw = vector_width(), lanes = lanes_per_key(), chunks = chunks_per_lane(), per_warp = 32 / lanes;
    const std::int64_t d = depth;
    std::string sizes;
    ExpressionPrinter size_exprs(sizes, "c");
    const std::string h = size_exprs.print(heads, "0"), g = size_exprs.print(group, "0"), s = size_exprs.print(tokens, "0"),
                      t = size_exprs.print(keys, "0");
    std::string q_code, k_code, v_code, bias_code;
    ExpressionPrinter q_exprs(q_code, "q"), k_exprs(k_code, "k"), v_exprs(v_code, "v"), bias_exprs(bias_code, "b");
    const std::string q_at = q_exprs.print(q_view.index_expression(), "qz"), k_at = k_exprs.print(k_view.index_expression(), "kz"),
                      v_at = v_exprs.print(v_view.index_expression(), "vz"), bias_at = bias_exprs.print(bias_view.index_expression(), "bz");
    const std::string unpack = inputs[1] == DType::BF16 ? "luminal_unpack_bf16" : inputs[1] == DType::F16 ? "luminal_unpack_f16" : "luminal_unpack_f32";
    const std::string ninf = "(-__int_as_float(0x7f800000))";

    std::string code = std::string(kKernelPrelude) + std::string(kAttentionPrelude);
    code += signature(entry(), DType::F32, inputs, true) + " {\n";
    code += dim_declarations({&size_exprs, &q_exprs, &k_exprs, &v_exprs, &bias_exprs}) + sizes;
    code += fmt::format("  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5);\n"
                        "  const int slot = lane / {0}, part = lane % {0};\n", lanes);
    code += fmt::format("  const i64 splits = (i64)gridDim.x / {0}, head = (i64)blockIdx.x / splits, split = (i64)blockIdx.x % splits;\n"
                        "  const i64 rows = {1} * {2}, per = ({3} + splits - 1) / splits;\n"
                        "  const i64 first = split * per, last = first + per < {3} ? first + per : {3};\n",
                        h, g, s, t);
    code += fmt::format("  int* const counters = reinterpret_cast<int*>(scratch);\n"
                        "  float* const partials = scratch + ({} + 63) / 64 * 64;  // after counter_words(KV heads)\n", h);
    code += fmt::format("  __shared__ float merged_m[8][{0}], merged_l[8][{0}];\n  __shared__ float merged_o[8][{0}][{1}];\n"
                        "  __shared__ int last_block;\n",
                        kRowTile, d);
    code += fmt::format("  for (i64 r0 = 0; r0 < rows; r0 += {0}) {{\n    const int tile = (int)(rows - r0 < {0} ? rows - r0 : {0});\n", kRowTile);
    code += fmt::format("    float q[{0}][{1}][{2}], o[{0}][{1}][{2}], m[{0}], l[{0}];\n", kRowTile, chunks, vw);
    code += fmt::format("    #pragma unroll\n    for (int rt = 0; rt < {0}; ++rt) {{\n    m[rt] = {1};\n    l[rt] = 0.0f;\n"
                        "    #pragma unroll\n    for (int c = 0; c < {2}; ++c)\n    #pragma unroll\n    for (int e = 0; e < {3}; ++e) {{\n"
                        "    o[rt][c][e] = 0.0f;\n    const i64 qz = (head * rows + r0 + (rt < tile ? rt : 0)) * {4} + (part + c * {5}) * {3} + e;\n"
                        "{6}    q[rt][c][e] = {7};\n    }}\n    }}\n",
                        kRowTile, ninf, chunks, vw, d, lanes, q_code, widen(inputs[0], "in0[" + q_at + "]"));
    // The keys: each lane group takes kKeyUnroll of them per turn.
    // The loop is uniform over the warp (its lane groups shuffle together); keys past the split are skipped.
    code += fmt::format("    for (i64 j0 = first + (i64)warp * {0}; j0 < last; j0 += (i64)warps * {0} * {1}) {{\n", per_warp, kKeyUnroll);
    code += fmt::format("      uint4 kc[{0}][{1}], vc[{0}][{1}];\n", kKeyUnroll, chunks);
    code += fmt::format("      #pragma unroll\n      for (int u = 0; u < {0}; ++u) {{\n      const i64 j = j0 + slot + (i64)u * warps * {1};\n"
                        "      const i64 jj = j < last ? j : first;\n      const i64 kz = (head * {2} * {3} + jj) * {4};\n{5}"
                        "      const i64 vz = head * {2} * {4} * {3} + jj;\n{6}",
                        kKeyUnroll, per_warp, g, t, d, k_code, v_code);
    code += fmt::format("      #pragma unroll\n      for (int c = 0; c < {0}; ++c) {{\n"
                        "      kc[u][c] = *reinterpret_cast<const uint4*>(in1 + {1} + (part + c * {2}) * {3});\n"
                        "      vc[u][c] = *reinterpret_cast<const uint4*>(in2 + {4} + (part + c * {2}) * {3});\n      }}\n      }}\n",
                        chunks, k_at, lanes, vw, v_at);
    code += fmt::format("      #pragma unroll\n      for (int u = 0; u < {0}; ++u) {{\n      const i64 j = j0 + slot + (i64)u * warps * {1};\n"
                        "      float kf[{2}][{3}], vf[{2}][{3}];\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c) {{ {4}(kc[u][c], kf[c]); {4}(vc[u][c], vf[c]); }}\n",
                        kKeyUnroll, per_warp, chunks, vw, unpack);
    code += fmt::format("      #pragma unroll\n      for (int rt = 0; rt < {0}; ++rt) {{\n      float dot = 0.0f;\n"
                        "      #pragma unroll\n      for (int c = 0; c < {1}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {2}; ++e) dot = fmaf(q[rt][c][e], kf[c][e], dot);\n"
                        "      for (int x = {3} / 2; x > 0; x >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, x);\n"
                        "      if (rt >= tile || j >= last) continue;\n      const i64 bz = (head * rows + r0 + rt) * {4} + j;\n{5}",
                        kRowTile, chunks, vw, lanes, t, bias_code);
    code += fmt::format("      const float score = {0} * dot + {1};\n      const float top = fmaxf(m[rt], score);\n"
                        "      if (top == {2}) continue;\n      const float keep = expf(m[rt] - top), weight = expf(score - top);\n"
                        "      l[rt] = l[rt] * keep + weight;\n      m[rt] = top;\n"
                        "      #pragma unroll\n      for (int c = 0; c < {3}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {4}; ++e) o[rt][c][e] = fmaf(weight, vf[c][e], o[rt][c][e] * keep);\n"
                        "      }}\n      }}\n    }}\n",
                        literal(scale, DType::F32), widen(inputs[3], "in3[" + bias_at + "]"),
                        ninf, chunks, vw);
    // Merge the lane groups of the warp, then the warps.
    code += fmt::format("    #pragma unroll\n    for (int rt = 0; rt < {0}; ++rt) {{\n"
                        "    for (int x = {1}; x < 32; x <<= 1) {{\n"
                        "      const float m2 = __shfl_xor_sync(0xffffffffu, m[rt], x), l2 = __shfl_xor_sync(0xffffffffu, l[rt], x);\n"
                        "      float mine, theirs;\n      luminal_merge(m[rt], l[rt], m2, l2, mine, theirs);\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {3}; ++e)\n"
                        "        o[rt][c][e] = o[rt][c][e] * mine + __shfl_xor_sync(0xffffffffu, o[rt][c][e], x) * theirs;\n    }}\n"
                        "    if (slot == 0) {{\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {3}; ++e)\n"
                        "        merged_o[warp][rt][(part + c * {1}) * {3} + e] = o[rt][c][e];\n"
                        "      if (part == 0) {{ merged_m[warp][rt] = m[rt]; merged_l[warp][rt] = l[rt]; }}\n    }}\n    }}\n"
                        "    __syncthreads();\n",
                        kRowTile, lanes, chunks, vw);
    code += fmt::format("    for (int x = threadIdx.x; x < tile * {0}; x += blockDim.x) {{\n"
                        "      const int rt = x / {0}, e = x % {0};\n"
                        "      float top = {1}, total = 0.0f, acc = 0.0f;\n"
                        "      for (int w = 0; w < warps; ++w) top = fmaxf(top, merged_m[w][rt]);\n"
                        "      for (int w = 0; w < warps; ++w) {{\n"
                        "        const float f = merged_m[w][rt] == {1} ? 0.0f : expf(merged_m[w][rt] - top);\n"
                        "        total += merged_l[w][rt] * f;\n        acc += merged_o[w][rt][e] * f;\n      }}\n"
                        "      const i64 row = head * rows + r0 + rt;\n"
                        "      if (splits == 1) {{ out[row * {0} + e] = acc / total; continue; }}\n"
                        "      float* const p = partials + ((head * splits + split) * rows + r0 + rt) * {2};\n"
                        "      p[2 + e] = acc;\n      if (e == 0) {{ p[0] = top; p[1] = total; }}\n    }}\n"
                        "    __syncthreads();\n  }}\n",
                        d, ninf, d + 2);
    // The last block of this head to finish merges the splits.
    code += fmt::format("  if (splits == 1) return;\n  __threadfence();\n  __syncthreads();\n"
                        "  if (threadIdx.x == 0) last_block = atomicAdd(counters + head, 1) == (int)splits - 1;\n"
                        "  __syncthreads();\n  if (!last_block) return;\n  __threadfence();\n"
                        "  for (i64 x = threadIdx.x; x < rows * {0}; x += blockDim.x) {{\n"
                        "    const i64 r = x / {0}, e = x % {0};\n"
                        "    float top = {1}, total = 0.0f, acc = 0.0f;\n"
                        "    for (i64 k = 0; k < splits; ++k) top = fmaxf(top, partials[((head * splits + k) * rows + r) * {2}]);\n"
                        "    for (i64 k = 0; k < splits; ++k) {{\n"
                        "      const float* const p = partials + ((head * splits + k) * rows + r) * {2};\n"
                        "      const float f = p[0] == {1} ? 0.0f : expf(p[0] - top);\n"
                        "      total += p[1] * f;\n      acc += p[2 + e] * f;\n    }}\n"
                        "    out[(head * rows + r) * {0} + e] = acc / total;\n  }}\n"
                        "  if (threadIdx.x == 0) counters[head] = 0;\n}}\n",
                        d, ninf, d + 2);
    return code;
}

}  // namespace luminal::cuda

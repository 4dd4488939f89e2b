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
#ifndef LUMINAL_HOST_SHIM
// 2^x in one instruction; weights below 2^-126 are flushed to zero (the host shim gives its own).
__device__ __forceinline__ float luminal_exp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
#endif
// Folds state (m2, l2) into (m, l), returning the factors that scale each side's values (maxima in log2 units).
__device__ __forceinline__ void luminal_merge(float& m, float& l, float m2, float l2, float& mine, float& theirs) {
  const float top = fmaxf(m, m2);
  mine = m == -__int_as_float(0x7f800000) ? 0.0f : luminal_exp2(m - top);
  theirs = m2 == -__int_as_float(0x7f800000) ? 0.0f : luminal_exp2(m2 - top);
  l = l * mine + l2 * theirs;
  m = top;
}
)";

namespace attention_detail {

// Each axis of a view is affine in its coordinate, so a view is read at per-axis coordinates (C expressions;
// empty for 0) with no division: the start (base and offsets) and every stride are printed once at the top
// of the kernel; a coordinate times a stride is a 64-bit multiply-add of a 32-bit value.
class AffineView {
public:
    AffineView(const ShapeTracker& view, source_detail::ExpressionPrinter& once) : view_(view), once_(once) {}

    std::string start() const {
        Expression at = view_.base();
        for (const auto& a : view_.axes()) at = at + a.offset * a.stride;
        return once_.print(at, "0");
    }
    std::string term(std::size_t axis, std::string_view coordinate) const {
        const Expression& stride = view_.axes()[axis].stride;
        if (coordinate.empty() || stride == Expression(0)) return "";
        return fmt::format(" + (i64)({}) * {}", coordinate, once_.print(stride, "0"));
    }

private:
    const ShapeTracker& view_;
    source_detail::ExpressionPrinter& once_;
};

}  // namespace attention_detail

inline std::string AttentionKernel::source() const {
    using namespace source_detail;
    using attention_detail::AffineView;
    const int vw = vector_width(), lanes = lanes_per_key(), chunks = chunks_per_lane(), per_warp = 32 / lanes;
    const std::int64_t d = depth;
    std::string sizes;
    ExpressionPrinter once(sizes, "c");
    const std::string h = once.print(heads, "0"), g = once.print(group, "0"), s = once.print(tokens, "0"), t = once.print(keys, "0");
    const AffineView qa{q_view, once}, ka{k_view, once}, va{v_view, once}, ba{bias_view, once};
    const std::string q_start = qa.start() + qa.term(0, "head"), k_start = ka.start() + ka.term(0, "head"),
                      v_start = va.start() + va.term(0, "head"), b_start = ba.start() + ba.term(0, "head");
    const std::string q_row = qa.term(1, "gi") + qa.term(2, "si"), b_row = ba.term(1, "gi") + ba.term(2, "si");
    const std::string q_element = qa.term(3, "e");
    const std::string k_key = ka.term(2, "jj"), v_key = va.term(3, "jj"), b_key = ba.term(3, "jj");
    const std::string unpack = inputs[1] == DType::BF16 ? "luminal_unpack_bf16" : inputs[1] == DType::F16 ? "luminal_unpack_f16" : "luminal_unpack_f32";
    const std::string ninf = "(-__int_as_float(0x7f800000))";
    const std::int64_t merged_width = std::max<std::int64_t>(kRowTile * d, kMaxSplits);

    std::string code = std::string(kKernelPrelude) + std::string(kAttentionPrelude);
    const std::string declared = signature(entry(), DType::F32, inputs, true);
    code += block_bound_declaration(declared, 2) + declared + " {\n";
    code += dim_declarations({&once}) + sizes;
    code += fmt::format("  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (int)(blockDim.x >> 5);\n"
                        "  const int slot = lane / {0}, part = lane % {0};\n", lanes);
    // 32-bit positions: rows and keys are far below 2^31; only buffer offsets are 64-bit.
    code += fmt::format("  const int tokens = (int){2}, keys = (int){3};\n"
                        "  const int splits = (int)gridDim.x / (int){0}, head = (int)blockIdx.x / splits, split = (int)blockIdx.x % splits;\n"
                        "  const int rows = (int){1} * tokens, per = (keys + splits - 1) / splits;\n"
                        "  const int first = split * per, last = first + per < keys ? first + per : keys;\n",
                        h, g, s, t);
    code += fmt::format("  int* const counters = reinterpret_cast<int*>(scratch);\n"
                        "  float* const partials = scratch + ({} + 63) / 64 * 64;  // after counter_words(KV heads)\n", h);
    // merged: the warps' values per row, then the last block's factor per split.
    code += fmt::format("  __shared__ float merged_m[8][{0}], merged_l[8][{0}];\n  __shared__ float merged[8][{1}];\n"
                        "  __shared__ int last_block;\n  __shared__ float q_tile[{0}][{2}];\n",
                        kRowTile, merged_width, d);
    code += fmt::format("  const i64 q_head = {}, k_head = {}, v_head = {}, b_head = {};\n", q_start, k_start, v_start, b_start);
    code += fmt::format("  for (int r0 = 0; r0 < rows; r0 += {0}) {{\n    const int tile = rows - r0 < {0} ? rows - r0 : {0};\n", kRowTile);
    // The tile's queries go to shared memory, read coalesced once: registers hold the values instead.
    code += fmt::format("    float o[{0}][{1}][{2}], m[{0}], l[{0}];\n    i64 b_at[{0}];\n", kRowTile, chunks, vw);
    code += fmt::format("    for (int x = threadIdx.x; x < {0} * {1}; x += blockDim.x) {{\n"
                        "      const int rt = x / {1}, e = x % {1}, r = r0 + (rt < tile ? rt : 0), gi = r / tokens, si = r % tokens;\n"
                        "      q_tile[rt][e] = {2};\n    }}\n",
                        kRowTile, d, widen(inputs[0], "in0[q_head" + q_row + q_element + "]"));
    code += fmt::format("    #pragma unroll\n    for (int rt = 0; rt < {0}; ++rt) {{\n"
                        "    const int r = r0 + (rt < tile ? rt : 0), gi = r / tokens, si = r % tokens;\n"
                        "    b_at[rt] = b_head{1};\n    m[rt] = {2};\n    l[rt] = 0.0f;\n"
                        "    #pragma unroll\n    for (int c = 0; c < {3}; ++c)\n    #pragma unroll\n    for (int e = 0; e < {4}; ++e) o[rt][c][e] = 0.0f;\n"
                        "    }}\n    __syncthreads();\n",
                        kRowTile, b_row, ninf, chunks, vw);
    // The keys: each lane group takes kKeyUnroll of them per turn, their bias issued with their keys and values.
    // The loop is uniform over the warp (its lane groups shuffle together); keys past the split are skipped.
    code += fmt::format("    for (int j0 = first + warp * {0}; j0 < last; j0 += warps * {0} * {1}) {{\n", per_warp, kKeyUnroll);
    code += fmt::format("      uint4 kc[{0}][{1}], vc[{0}][{1}];\n      float bias[{0}][{2}];\n", kKeyUnroll, chunks, kRowTile);
    code += fmt::format("      #pragma unroll\n      for (int u = 0; u < {0}; ++u) {{\n      const int j = j0 + slot + u * warps * {1};\n"
                        "      const int jj = j < last ? j : first;\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c) {{\n"
                        "      kc[u][c] = *reinterpret_cast<const uint4*>(in1 + k_head{3} + (part + c * {4}) * {5});\n"
                        "      vc[u][c] = *reinterpret_cast<const uint4*>(in2 + v_head{6} + (part + c * {4}) * {5});\n      }}\n"
                        "      #pragma unroll\n      for (int rt = 0; rt < {7}; ++rt) bias[u][rt] = {8};\n      }}\n",
                        kKeyUnroll, per_warp, chunks, k_key, lanes, vw, v_key, kRowTile,
                        widen(inputs[3], "in3[b_at[rt]" + b_key + "]"));
    // Every score of the turn first (the warp still converged for its shuffles), in log2 units; then each row's
    // online softmax over the turn's keys, its values rescaled only when the maximum grows by more than 2^8
    // (weights up to 256 stay exact in f32): a rare branch instead of a rescale per key. Rows past the tile
    // repeat its first row and are never stored: a branch on them would let the compiler sink the value and
    // bias loads behind it, issued only after the scores (32 bytes in flight instead of 96).
    code += fmt::format("      float score[{0}][{1}];\n"
                        "      #pragma unroll\n      for (int u = 0; u < {0}; ++u) {{\n      float kf[{2}][{3}];\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c) {4}(kc[u][c], kf[c]);\n"
                        "      #pragma unroll\n      for (int rt = 0; rt < {1}; ++rt) {{\n      float dot = 0.0f;\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c)\n      #pragma unroll\n"
                        "      for (int e = 0; e < {3}; ++e) dot = fmaf(q_tile[rt][(part + c * {5}) * {3} + e], kf[c][e], dot);\n"
                        "      score[u][rt] = dot;\n      }}\n      }}\n"
                        "      #pragma unroll\n      for (int x = {5} / 2; x > 0; x >>= 1)\n"
                        "      #pragma unroll\n      for (int u = 0; u < {0}; ++u)\n"
                        "      #pragma unroll\n      for (int rt = 0; rt < {1}; ++rt) score[u][rt] += __shfl_xor_sync(0xffffffffu, score[u][rt], x);\n",
                        kKeyUnroll, kRowTile, chunks, vw, unpack, lanes);
    constexpr double log2e = 1.4426950408889634;
    code += fmt::format("      #pragma unroll\n      for (int rt = 0; rt < {0}; ++rt) {{\n"
                        "      float top = m[rt];\n"
                        "      #pragma unroll\n      for (int u = 0; u < {1}; ++u) {{\n"
                        "        score[u][rt] = j0 + slot + u * warps * {2} < last ? fmaf({3}, score[u][rt], {4} * bias[u][rt]) : {5};\n"
                        "        top = fmaxf(top, score[u][rt]);\n      }}\n"
                        "      if (top > m[rt] + 8.0f) {{\n        const float keep = luminal_exp2(m[rt] - top);\n"
                        "        l[rt] *= keep;\n        m[rt] = top;\n"
                        "        #pragma unroll\n        for (int c = 0; c < {6}; ++c)\n        #pragma unroll\n"
                        "        for (int e = 0; e < {7}; ++e) o[rt][c][e] *= keep;\n      }}\n"
                        "      #pragma unroll\n      for (int u = 0; u < {1}; ++u) {{\n"
                        "        const float weight = score[u][rt] == {5} ? 0.0f : luminal_exp2(score[u][rt] - m[rt]);\n"
                        "        l[rt] += weight;\n        float vf[{6}][{7}];\n"
                        "        #pragma unroll\n        for (int c = 0; c < {6}; ++c) {8}(vc[u][c], vf[c]);\n"
                        "        #pragma unroll\n        for (int c = 0; c < {6}; ++c)\n        #pragma unroll\n"
                        "        for (int e = 0; e < {7}; ++e) o[rt][c][e] = fmaf(weight, vf[c][e], o[rt][c][e]);\n      }}\n"
                        "      }}\n    }}\n",
                        kRowTile, kKeyUnroll, per_warp, literal(scale * log2e, DType::F32), literal(log2e, DType::F32), ninf, chunks, vw,
                        unpack);
    // Merge the lane groups of the warp, then the warps.
    code += fmt::format("    #pragma unroll\n    for (int rt = 0; rt < {0}; ++rt) {{\n"
                        "    for (int x = {1}; x < 32; x <<= 1) {{\n"
                        "      const float m2 = __shfl_xor_sync(0xffffffffu, m[rt], x), l2 = __shfl_xor_sync(0xffffffffu, l[rt], x);\n"
                        "      float mine, theirs;\n      luminal_merge(m[rt], l[rt], m2, l2, mine, theirs);\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {3}; ++e)\n"
                        "        o[rt][c][e] = o[rt][c][e] * mine + __shfl_xor_sync(0xffffffffu, o[rt][c][e], x) * theirs;\n    }}\n"
                        "    if (slot == 0) {{\n"
                        "      #pragma unroll\n      for (int c = 0; c < {2}; ++c)\n      #pragma unroll\n      for (int e = 0; e < {3}; ++e)\n"
                        "        merged[warp][rt * {4} + (part + c * {1}) * {3} + e] = o[rt][c][e];\n"
                        "      if (part == 0) {{ merged_m[warp][rt] = m[rt]; merged_l[warp][rt] = l[rt]; }}\n    }}\n    }}\n"
                        "    __syncthreads();\n",
                        kRowTile, lanes, chunks, vw, d);
    code += fmt::format("    for (int x = threadIdx.x; x < tile * {0}; x += blockDim.x) {{\n"
                        "      const int rt = x / {0}, e = x % {0};\n"
                        "      float top = {1}, total = 0.0f, acc = 0.0f;\n"
                        "      for (int w = 0; w < warps; ++w) top = fmaxf(top, merged_m[w][rt]);\n"
                        "      for (int w = 0; w < warps; ++w) {{\n"
                        "        const float f = merged_m[w][rt] == {1} ? 0.0f : luminal_exp2(merged_m[w][rt] - top);\n"
                        "        total += merged_l[w][rt] * f;\n        acc += merged[w][rt * {0} + e] * f;\n      }}\n"
                        "      const int row = head * rows + r0 + rt;\n"
                        "      if (splits == 1) {{ out[(i64)row * {0} + e] = acc / total; continue; }}\n"
                        "      float* const p = partials + ((i64)(head * splits + split) * rows + r0 + rt) * {2};\n"
                        "      p[2 + e] = acc;\n      if (e == 0) {{ p[0] = top; p[1] = total; }}\n    }}\n"
                        "    __syncthreads();\n  }}\n",
                        d, ninf, d + 2);
    // The last block of this head to finish merges the splits: a warp per row, its lanes reading the splits'
    // maxima and sums at once, then each lane weighing its outputs' values over the splits, loads issued ahead.
    const std::int64_t per_lane = (d + 31) / 32;
    code += fmt::format("  if (splits == 1) return;\n  __threadfence();\n  __syncthreads();\n"
                        "  if (threadIdx.x == 0) last_block = atomicAdd(counters + head, 1) == splits - 1;\n"
                        "  __syncthreads();\n  if (!last_block) return;\n  __threadfence();\n"
                        "  float* const factor = merged[warp];\n"
                        "  for (int r = warp; r < rows; r += warps) {{\n"
                        "    const float* const at = partials + ((i64)head * splits * rows + r) * {0};\n"
                        "    const i64 stride = (i64)rows * {0};\n"
                        "    float top = {1}, total = 0.0f;\n"
                        "    for (int k = lane; k < splits; k += 32) top = fmaxf(top, at[k * stride]);\n"
                        "    for (int x = 16; x > 0; x >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, x));\n"
                        "    for (int k = lane; k < splits; k += 32) {{\n"
                        "      const float f = at[k * stride] == {1} ? 0.0f : luminal_exp2(at[k * stride] - top);\n"
                        "      factor[k] = f;\n      total += at[k * stride + 1] * f;\n    }}\n"
                        "    for (int x = 16; x > 0; x >>= 1) total += __shfl_xor_sync(0xffffffffu, total, x);\n"
                        "    __syncwarp();\n"
                        "    float acc[{2}] = {{}};\n"
                        "    #pragma unroll {4}\n    for (int k = 0; k < splits; ++k)\n"
                        "      #pragma unroll\n      for (int i = 0; i < {2}; ++i)\n"
                        "        if (lane + i * 32 < {3}) acc[i] = fmaf(factor[k], at[k * stride + 2 + lane + i * 32], acc[i]);\n"
                        "    #pragma unroll\n    for (int i = 0; i < {2}; ++i)\n"
                        "      if (lane + i * 32 < {3}) out[((i64)head * rows + r) * {3} + lane + i * 32] = acc[i] / total;\n"
                        "    __syncwarp();\n  }}\n"
                        "  if (threadIdx.x == 0) counters[head] = 0;\n}}\n",
                        d + 2, ninf, per_lane, d, kMergeUnroll);
    return code;
}

}  // namespace luminal::cuda

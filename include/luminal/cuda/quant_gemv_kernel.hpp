#pragma once
// The quantized form of the decode GEMV (GemvOp::quant: QuantizedMatmul on
// CUDA, with the prologue and epilogues of cuda.Gemv): a weight kept as its
// ggml blocks. The kernel is GemvKernel (gemv_kernel.hpp); the block walk of
// its source is quant_gemv_source.hpp.
//
// Each block stages the activation rows of up to `tile_tokens` tokens in
// shared memory as f32 (computing the prologue), and for Activations::Q8
// rounds them once more to 8-bit 32-element blocks with their scale and
// quant sum. Then each warp takes a weight row at a time and, for each of the
// op's weights, walks the row in chunks of whole blocks: every lane issues
// kQuantGemvLoads 16-byte loads of the chunk's bytes before any is used, the
// warp stores them in its shared stage, and the lanes take the chunk's
// 32-element groups in turn (a K super-block holds eight), each decoded once
// for all the tile's tokens: integer dot products with the 8-bit activations,
// or f32 decode and FMA. Sums are f32; the warp's partial sums meet in a
// butterfly and one lane per output runs the epilogue. The blocks of a row
// need no alignment: the chunk is loaded from the 16-byte boundary below it,
// and a last vector past the end of the weight is read byte by byte.
#include <cstddef>
#include <cstdint>

#include "luminal/lowering/quantized.hpp"

namespace luminal::cuda {

inline constexpr int kQuantGemvLoads = 4;  // 16-byte loads per lane in flight per chunk
inline constexpr std::int64_t kQuantGemvStageBytes = 32 * 16 * kQuantGemvLoads;  // a warp's chunk, loaded whole

// Shared bytes one token's staged activation row takes: f32, and its 8-bit blocks for Activations::Q8.
inline std::size_t quant_staged_bytes(Activations a, std::int64_t cols) {
    const auto k = static_cast<std::size_t>(cols);
    return k * sizeof(float) + (a == Activations::Q8 ? k + k / kQuantBlock * (sizeof(float) + sizeof(std::int32_t)) : 0);
}

}  // namespace luminal::cuda

#pragma once
// QuantizedMatmul (lowering/quantized.hpp) on CUDA: few activation rows times
// a weight kept as its ggml blocks, the decode GEMV of a GGUF model. The
// source is quant_gemv_source.hpp.
//
// Each block first stages the activation rows of up to `tile_tokens` tokens
// in shared memory: as f32, or (Activations::Q8) rounded once to 8-bit
// 32-element blocks with their scale and quant sum. Then each warp takes a
// weight row at a time and walks it in chunks of whole blocks: every lane
// issues kQuantGemvLoads 16-byte loads of the chunk's bytes before any is
// used, the warp stores them in its shared stage, and the lanes take the
// chunk's 32-element groups in turn (a K super-block holds eight), each
// decoded once for all the tile's tokens: integer dot products with the 8-bit
// activations, or f32 decode and FMA. Sums are f32; the warp's partial sums
// meet in a butterfly. The blocks of a row need no alignment: the chunk is
// loaded from the 16-byte boundary below it, and a last vector past the end
// of the weight is read byte by byte.
#include <algorithm>
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/lowering/quantized.hpp"

namespace luminal::cuda {

inline constexpr int kQuantGemvWarps = 8;  // per block of kThreadsPerBlock; the shared stage holds this many
inline constexpr int kQuantGemvLoads = 4;  // 16-byte loads per lane in flight per chunk
inline constexpr std::int64_t kQuantGemvStageBytes = 32 * 16 * kQuantGemvLoads;  // a warp's chunk, loaded whole
inline constexpr std::size_t kQuantGemvSharedBudget = 64u << 10;  // bytes of staged activation rows a block holds

// Shared bytes one token's staged activation row takes.
inline std::size_t quant_activation_bytes(Activations a, std::int64_t cols) {
    const auto k = static_cast<std::size_t>(cols);
    return a == Activations::Q8 ? k + k / kQuantBlock * (sizeof(float) + sizeof(std::int32_t)) : k * sizeof(float);
}

struct QuantGemvKernel final : CustomKernel {
    QuantizedMatmulOp op;
    std::vector<DType> inputs;
    std::vector<ShapeTracker> views;  // the activation's, the blocks'
    Expression tokens;                // activation rows
    int tile_tokens = 1;
    std::uint32_t node = 0;

    std::int64_t row_bytes() const { return quantized_bytes(op.format, 1, op.cols); }
    std::int64_t groups_per_block() const { return block_elements(op.format) / kQuantBlock; }
    // Whole blocks per chunk, leaving room for the 16-byte alignment below its start and above its end.
    std::int64_t chunk_blocks() const {
        return std::max<std::int64_t>((kQuantGemvStageBytes - 32) / io::layout_of(op.format).block_bytes, 1);
    }

    std::string source() const override;  // quant_gemv_source.hpp
    std::string_view entry() const override { return "luminal_quant_gemv"; }

    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        const std::int64_t blocks = (op.rows + kQuantGemvWarps - 1) / kQuantGemvWarps;
        g.units = blocks;
        g.grid = tokens.eval(dims) == 0 || op.rows == 0 ? 0u
                                                          : static_cast<unsigned>(std::min<std::int64_t>(blocks, 2 * multiprocessors));
        g.block = kThreadsPerBlock;
        g.shared_bytes = static_cast<std::size_t>(tile_tokens) * quant_activation_bytes(op.activations, op.cols);
        return g;
    }

    // The blocks once per token tile, the activation rows by every block (from L2), f32 results.
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double s = static_cast<double>(tokens.eval(dims)), n = static_cast<double>(op.rows),
                     k = static_cast<double>(op.cols), weight = static_cast<double>(quantized_bytes(op.format, op.rows, op.cols));
        w.grid = g.grid;
        w.units = g.units;
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes + static_cast<std::size_t>(kQuantGemvWarps * kQuantGemvStageBytes);
        add_read(w, sources[1], weight, device);
        (from_l2(sources[1], device) ? w.l2_rereads : w.dram_read) += (std::ceil(s / tile_tokens) - 1) * weight;
        const double before = w.bytes();
        add_read(w, sources[0], s * k, device);
        w.l2_rereads += (std::max(static_cast<double>(g.grid), 1.0) - 1) * (w.bytes() - before);
        add_write(w, s * n * sizeof(float), device);
        w.dram_in_flight = 16.0 * kQuantGemvLoads;
        w.l2_in_flight = 16;
        // Per weight element: a quarter of a 4-byte integer dot product per token and a share of the
        // unpacking, or a decode and an FMA per token.
        w.flops = op.activations == Activations::Q8 ? n * k * (0.5 + 0.5 * s) : n * k * (3 + 2 * s);
        return w;
    }

    // QuantizedMatmul's reference semantics (io's dequantizers, activations rounded as the source rounds them).
    void interpret(const KernelBuffers& b) const override {
        const ReferenceInput readers[] = {ReferenceInput(*b.inputs[0], views[0], b.dims, node),
                                          ReferenceInput(*b.inputs[1], views[1], b.dims, node)};
        op.reference(ReferenceCall{readers, b.out, b.dims, node});
    }
};

// QuantizedMatmul node `spec` as a kernel reading buffers of `dtypes`.
inline std::shared_ptr<const QuantGemvKernel> quant_gemv_kernel(const NodeSpec& spec, const QuantizedMatmulOp& op,
                                                                std::span<const DType> dtypes, std::uint32_t node) {
    check(op.layout == WeightLayout::Blocks && dtypes.size() == 2 && dtypes[0] == DType::F32 && dtypes[1] == DType::U8 &&
              spec.views[1].is_contiguous(),
          "cuda QuantizedMatmul", "node {}: CUDA reads f32 activations and the contiguous blocks as stored (u8), got {} and {}", node,
          name_of(dtypes[0]), dtypes.size() > 1 ? name_of(dtypes[1]) : "nothing");
    auto k = std::make_shared<QuantGemvKernel>();
    k->op = op;
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->views = spec.views;
    k->node = node;
    k->tokens = 1;
    for (std::size_t a = 0; a + 1 < spec.shape.size(); ++a) k->tokens = k->tokens * spec.shape[a];
    const std::size_t per_token = std::max<std::size_t>(quant_activation_bytes(op.activations, op.cols), 1);
    k->tile_tokens = static_cast<int>(std::clamp<std::size_t>(kQuantGemvSharedBudget / per_token, 1, 8));
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/quant_gemv_source.hpp"

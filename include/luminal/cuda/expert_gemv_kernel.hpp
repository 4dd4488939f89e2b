#pragma once
// ExpertMatmul (lowering/expert_matmul.hpp) on CUDA, and cuda.ExpertGateUp
// (expert_gate_up_op.hpp: gate and up streamed together, their sums combined
// by an epilogue): each chosen expert's weights are read once per tile of the
// rows that chose it, and never copied. The source is expert_gemv_source.hpp.
//
// The grid is one-dimensional (as every launch of the runtime is): block b
// takes the weight rows [8c, 8c + 8) of N, c = b % columns, for slot
// j = b / columns, the j-th distinct expert among experts[0, R) in
// increasing order; there are at most min(E, R) of them, and a block whose
// slot names none returns. Each block marks the experts its R indexes name in
// a shared bitmap (an index outside [0, E) is a FaultCode::ExpertIndex fault)
// and picks the j-th set bit. It then collects the rows that chose its
// expert, in order, a window of blockDim rows at a time (a prefix sum of the
// matches), and runs them in tiles of `tile_rows`: the tile's activations
// staged to shared memory as f32, then each warp streams one weight row at a
// time (each weight's row, with two), accumulating the tile's dot products in
// f32, summed in a butterfly.
// Weight rows of K contiguous values on 16-byte boundaries are read as
// 16-byte vectors, kExpertUnroll in flight per lane; any other view (K not a
// multiple of the vector width, an odd offset, a strided row) element by
// element through the view.
#include <algorithm>
#include <cmath>
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/expert_rows_source.hpp"
#include "luminal/cuda/kernel_lowering.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/cuda/quant_gemv_kernel.hpp"
#include "luminal/io/gguf_quants.hpp"
#include "luminal/lowering/expert_matmul.hpp"

namespace luminal::cuda {

inline constexpr std::int64_t kExpertRowsPerBlock = 8;       // weight rows a block takes: one per warp of kThreadsPerBlock
inline constexpr std::size_t kExpertTileBudget = 32u << 10;  // bytes of f32 activation rows a tile stages
inline constexpr int kExpertMaxTile = 8;                     // rows a tile accumulates (registers per lane)
inline constexpr int kExpertUnroll = 4;                      // 16-byte weight loads in flight per lane
inline constexpr std::size_t kExpertStageBytes = kExpertRowsPerBlock * kQuantGemvStageBytes;  // quantized: the warps' chunk stages

struct ExpertGemvKernel final : CustomKernel {
    std::vector<DType> inputs;             // x, the weights, experts
    std::vector<ShapeTracker> views;       // x (R * K elements in order), each W [E, N, K] (or its blocks), experts (R in order)
    std::optional<QuantizedMatmulOp> quant;  // rows, cols: one expert's matrix
    Expression rows, experts, outputs, depth;  // R, E, N, K
    int weights = 1;                       // two: gate and up, combined by the epilogue
    Body epilogue;                         // two weights: at element r * N + n, StageValue j reads acc_j
    bool vector = false;                   // the weights' rows stream as 16-byte vectors
    int tile_rows = 1;
    std::uint32_t node = 0;

    std::size_t experts_input() const { return 1 + static_cast<std::size_t>(weights); }

    std::string source() const override;  // expert_gemv_source.hpp
    // Shared bytes one staged activation row takes.
    std::size_t staged_bytes() const {
        const std::int64_t k = *depth.as_constant();
        return quant ? quant_staged_bytes(quant->activations, k) : static_cast<std::size_t>(k) * sizeof(float);
    }
    std::string_view entry() const override { return "luminal_expert_gemv"; }
    int vector_width() const { return static_cast<int>(16 / size_of(inputs[1])); }

    static std::int64_t columns(std::int64_t n) { return (n + kExpertRowsPerBlock - 1) / kExpertRowsPerBlock; }
    // Blocks with an expert to read: one row of columns per distinct expert there can be.
    std::int64_t live_blocks(const DynMap& dims) const {
        return std::min(experts.eval(dims), rows.eval(dims)) * columns(outputs.eval(dims));
    }

    KernelGeometry geometry(const DynMap& dims, int) const override {
        KernelGeometry g;
        const std::int64_t blocks = std::max<std::int64_t>(live_blocks(dims), 0);
        g.grid = static_cast<unsigned>(blocks);
        g.block = kThreadsPerBlock;
        // Quantized, the chunk stages; the tile's rows (f32, and their 8-bit blocks); the row grouping's.
        g.shared_bytes = (quant ? kExpertStageBytes : 0) + static_cast<std::size_t>(tile_rows) * staged_bytes() +
                         expert_grouping_shared_bytes(experts.eval(dims));
        return g;
    }

    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double r = static_cast<double>(rows.eval(dims)), e = static_cast<double>(experts.eval(dims)),
                     n = static_cast<double>(outputs.eval(dims)), k = static_cast<double>(depth.eval(dims));
        const double slots = std::min(e, r), live = static_cast<double>(std::max<std::int64_t>(live_blocks(dims), 0));
        // Blocks past the distinct experts return at once: the parallelism is the live blocks.
        w.grid = std::min<std::int64_t>(g.grid, static_cast<std::int64_t>(live));
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes;
        // Each chosen expert once per tile of its rows (rows spread evenly over the slots).
        const double matrices = slots * (quant ? static_cast<double>(quantized_bytes(quant->format, quant->rows, quant->cols)) : n * k),
                     tiles = slots > 0 ? std::ceil(r / slots / tile_rows) : 0;
        add_expert_reads(w, sources, weights, matrices, tiles, r, k, static_cast<double>(columns(static_cast<std::int64_t>(n))), live, device);
        add_write(w, r * n * sizeof(float), device);
        w.dram_in_flight = quant ? 16.0 * kQuantGemvLoads : vector ? 16.0 * kExpertUnroll : static_cast<double>(size_of(inputs[1]));
        w.l2_in_flight = 16;
        w.flops = weights * (quant && quant->activations == Activations::Q8 ? r * n * k : 2 * r * n * k);
        return w;
    }

    // Each product a dot product in f32, the activations rounded to f32 as staged (and then to 8-bit blocks for
    // Activations::Q8); blocks decoded by io's decoders, as the source decodes each group. Two weights' products meet
    // in the epilogue.
    void interpret(const KernelBuffers& b) const override {
        const ReferenceInput x(*b.inputs[0], views[0], b.dims, node), picks(*b.inputs[experts_input()], views[experts_input()], b.dims, node);
        const std::int64_t r_count = rows.eval(b.dims), e_count = experts.eval(b.dims), n = outputs.eval(b.dims),
                           k = depth.eval(b.dims);
        std::vector<ReferenceInput> ws;
        std::vector<std::vector<float>> decoded;
        for (int j = 1; j <= weights; ++j) {
            ws.emplace_back(*b.inputs[j], views[j], b.dims, node);
            if (quant) decoded.push_back(quantized_detail::dequantized(ws.back(), quant->format, e_count * n, k, ExpertMatmulOp::name, node));
        }
        auto weight = [&](int j, std::int64_t at) {
            return quant ? decoded[static_cast<std::size_t>(j)][static_cast<std::size_t>(at)] : static_cast<float>(ws[static_cast<std::size_t>(j)].f(at));
        };
        std::vector<double> staged(static_cast<std::size_t>(k));
        std::vector<float> row(static_cast<std::size_t>(k));
        std::vector<HostBuffer> accumulators(static_cast<std::size_t>(weights), HostBuffer(DType::F32, 1));
        std::optional<interpreter_detail::BodyRunner> combine;
        if (weights > 1) combine.emplace(epilogue, node, b, &accumulators);
        for (std::int64_t r = 0; r < r_count; ++r) {
            const std::int64_t e = picks.i(r);
            check(e >= 0 && e < e_count, ExpertMatmulOp::name.data(), "node {}: row {} picks expert {}, outside [0, {})", node,
                  r, e, e_count);
            for (std::int64_t i = 0; i < k; ++i) staged[static_cast<std::size_t>(i)] = static_cast<float>(x.f(r * k + i));
            if (quant && quant->activations == Activations::Q8) round_to_q8_blocks(staged);
            for (std::int64_t i = 0; i < k; ++i) row[static_cast<std::size_t>(i)] = static_cast<float>(staged[static_cast<std::size_t>(i)]);
            for (std::int64_t o = 0; o < n; ++o) {
                for (int j = 0; j < weights; ++j) {
                    float acc = 0;
                    for (std::int64_t i = 0; i < k; ++i)
                        acc = std::fma(row[static_cast<std::size_t>(i)], weight(j, (e * n + o) * k + i), acc);
                    accumulators[static_cast<std::size_t>(j)].store_double(0, acc);
                }
                if (!combine) {
                    b.out.copy_element(static_cast<std::size_t>(r * n + o), accumulators[0], 0);
                    continue;
                }
                combine->run(r * n + o);
                b.out.copy_element(static_cast<std::size_t>(r * n + o), combine->result(), 0);
            }
        }
    }
};

namespace expert_gemv_detail {

// Whether W [E, N, K] (of `dtype`) has rows of K contiguous values, each starting on a 16-byte boundary.
inline bool streams_rows(const ShapeTracker& w, DType dtype) {
    if (w.rank() != 3 || w.is_padded_or_masked()) return false;
    const auto& axes = w.axes();
    const auto k = axes[2].size.as_constant(), expert_stride = axes[0].stride.as_constant(),
               row_stride = axes[1].stride.as_constant();
    const auto start =
        (w.base() + axes[0].offset * axes[0].stride + axes[1].offset * axes[1].stride + axes[2].offset).as_constant();
    if (!k || !expert_stride || !row_stride || !start || !(axes[2].stride == Expression(1))) return false;
    const auto bytes = static_cast<std::int64_t>(size_of(dtype));
    auto aligned = [&](std::int64_t elements) { return (elements * bytes) % 16 == 0; };
    return *k > 0 && aligned(*k) && aligned(*expert_stride) && aligned(*row_stride) && aligned(*start);
}

}  // namespace expert_gemv_detail

// ExpertMatmul (one weight) or cuda.ExpertGateUp (two, combined by `epilogue`) node `spec` as a kernel reading
// buffers of `dtypes`: x, the weights, the experts.
inline std::shared_ptr<const ExpertGemvKernel> expert_gemv_kernel(const NodeSpec& spec, const std::optional<QuantizedMatmulOp>& quant,
                                                                   int weights, const FusedProgram* epilogue, std::span<const DType> dtypes,
                                                                   std::uint32_t node) {
    using namespace lowering_detail;
    constexpr const char* name = "cuda ExpertMatmul";
    const auto count = static_cast<std::size_t>(weights) + 2;
    check(dtypes.size() == count && spec.views.size() == count, name, "node {}: needs x, {} weights and the experts", node, weights);
    const ShapeTracker &w = spec.views[1], &picks = spec.views[count - 1];
    check(is_float(dtypes[0]), name, "node {}: activations must be floats, got {}", node, name_of(dtypes[0]));
    check(!is_float(dtypes[count - 1]) && !picks.is_padded_or_masked(), name, "node {}: experts must be unpadded integers, got {}",
          node, name_of(dtypes[count - 1]));
    for (int j = 2; j <= weights; ++j)
        check(dtypes[j] == dtypes[1] && spec.views[j].dims() == w.dims(), name, "node {}: the weights differ in dtype or shape", node);
    auto k = std::make_shared<ExpertGemvKernel>();
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->views = spec.views;
    k->rows = product(picks.dims());
    k->node = node;
    k->quant = quant;
    k->weights = weights;
    if (quant) {
        const auto bytes = product(w.dims()).as_constant();
        const std::int64_t matrix = quantized_bytes(quant->format, quant->rows, quant->cols);
        for (int j = 1; j <= weights; ++j)
            check(quant->layout == WeightLayout::Blocks && dtypes[j] == DType::U8 && spec.views[j].is_contiguous() && bytes, name,
                  "node {}: CUDA reads the contiguous blocks as stored (u8), got {}", node, name_of(dtypes[j]));
        check(matrix > 0 && *bytes % matrix == 0, name, "node {}: {} bytes of blocks are not whole matrices of {} bytes", node,
              *bytes, matrix);
        k->experts = *bytes / matrix;
        k->outputs = quant->rows;
        k->depth = quant->cols;
    } else {
        check(w.rank() == 3 && !w.is_padded_or_masked(), name, "node {}: the weights must be an unpadded [experts, out, in]",
              node);
        check(dtypes[1] == DType::F32 || dtypes[1] == DType::BF16 || dtypes[1] == DType::F16, name,
              "node {}: weights must be f32, f16 or bf16, got {}", node, name_of(dtypes[1]));
        k->experts = w.dim(0);
        k->outputs = w.dim(1);
        k->depth = w.dim(2);
        k->vector = true;
        for (int j = 1; j <= weights; ++j) k->vector = k->vector && expert_gemv_detail::streams_rows(spec.views[j], dtypes[j]);
    }
    const auto depth = k->depth.as_constant();
    check(depth.has_value(), name, "node {}: the row length must be a constant, got {}", node, k->depth.to_string());
    const std::size_t row_bytes = std::max<std::size_t>(k->staged_bytes(), sizeof(float));
    check(row_bytes <= kExpertTileBudget * 4, name, "node {}: rows of {} activations do not fit in shared memory", node,
          *depth);
    k->tile_rows = static_cast<int>(std::clamp<std::size_t>(kExpertTileBudget / row_bytes, 1, kExpertMaxTile));
    if (weights > 1) {
        check(epilogue != nullptr, name, "node {}: two products need an epilogue", node);
        std::vector<std::uint16_t> slot;
        for (int j = 0; j < weights; ++j) {
            Step acc;
            acc.kind = StepKind::StageValue;
            acc.dtype = DType::F32;
            acc.input = static_cast<std::uint16_t>(j);
            slot.push_back(k->epilogue.add(std::move(acc)));
        }
        add_program(k->epilogue, *epilogue, std::move(slot));
    }
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/expert_gemv_source.hpp"

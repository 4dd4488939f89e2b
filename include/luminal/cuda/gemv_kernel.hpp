#pragma once
// The decode GEMV's kernel: a cuda.Gemv node as kernel IR bodies (the
// prologue's stages and activation element, the epilogue over the
// accumulators), its launch, what it moves, and its result computed on the
// host as the source computes it. The source itself is gemv_source.hpp.
//
// Each block first writes the activation rows of up to `tile_tokens` tokens
// into shared memory (computing the prologue, or reading input 0), then its
// warps stream the weight rows: `rows` rows per warp, `unroll` 16-byte loads
// of each row in flight per lane, every weight read once per token tile; the
// warp's sums meet in a butterfly and one lane per output runs the epilogue.
// The grid is at most two blocks per SM, each taking row groups in turn, so
// the activation rows are made by few blocks. With GemvOp::quant the weights
// are ggml blocks, walked as quant_gemv_kernel.hpp describes.
#include <algorithm>
#include <bit>
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/gemv_op.hpp"
#include "luminal/cuda/kernel_lowering.hpp"
#include "luminal/cuda/quant_gemv_kernel.hpp"

namespace luminal::cuda {

inline constexpr int kGemvWarps = 8;                     // per block of kThreadsPerBlock
inline constexpr std::size_t kGemvSharedBudget = 64u << 10;  // bytes of activation rows a block holds

struct GemvKernel final : CustomKernel {
    std::vector<DType> inputs;
    DType out = DType::F32;
    bool prologue = false;
    std::vector<RowStageKernel> stages;  // of the prologue, over a token's activation row
    Body activation;                     // at element t * K + k
    std::vector<std::uint16_t> weight_inputs;
    std::vector<ShapeTracker> weight_views;
    Body epilogue;                       // at element t * N + n; StageValue j reads acc_j
    Expression tokens, rows, depth;      // S, N, K
    GemvLayout layout;
    std::optional<QuantizedMatmulOp> quant;  // the weights' blocks, as GemvOp::quant
    int tile_tokens = 1;
    std::uint32_t node = 0;

    std::string source() const override;  // gemv_source.hpp
    std::string_view entry() const override { return "luminal_gemv"; }
    int vector_width(std::size_t w) const { return static_cast<int>(16 / size_of(inputs[weight_inputs[w]])); }
    std::size_t staged_bytes(std::int64_t k) const {
        return quant ? quant_staged_bytes(quant->activations, k) : static_cast<std::size_t>(k) * sizeof(float);
    }

    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        const std::int64_t n = rows.eval(dims), groups = (n + layout.rows - 1) / layout.rows;
        const std::int64_t blocks = (groups + kGemvWarps - 1) / kGemvWarps;
        g.units = blocks;
        g.grid = tokens.eval(dims) == 0 || n == 0 ? 0u : static_cast<unsigned>(std::min<std::int64_t>(blocks, 2 * multiprocessors));
        g.block = kThreadsPerBlock;
        // Rows staged at once: a tile, or every token of a shorter step (a decode step stages one row, and
        // the blocks resident per SM are not cut by room for rows it never uses). The runtime reuses a
        // launch for every step of its size bucket (launch_plan.hpp's size_bucket), so it is sized for
        // the bucket's largest step.
        const auto bucket_tokens = static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(tokens.eval(dims), 1))));
        const std::int64_t staged_rows = std::min<std::int64_t>(bucket_tokens, tile_tokens);
        g.shared_bytes = static_cast<std::size_t>(staged_rows) * staged_bytes(depth.eval(dims)) +
                         (quant ? static_cast<std::size_t>(kGemvWarps * kQuantGemvStageBytes) : 0);
        return g;
    }

    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        using namespace work_detail;
        LaunchWork w;
        const double s = static_cast<double>(tokens.eval(dims)), n = static_cast<double>(rows.eval(dims)),
                     k = static_cast<double>(depth.eval(dims));
        w.grid = g.grid;
        w.units = g.units;
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes;
        const double tiles = std::ceil(s / tile_tokens);
        // Elements of the weight as its buffer stores them: bytes of blocks, or values.
        const double stored = quant ? static_cast<double>(quantized_bytes(quant->format, quant->rows, quant->cols)) : n * k;
        for (std::size_t j = 0; j < weight_inputs.size(); ++j) {
            add_read(w, sources[weight_inputs[j]], stored, device);
            (from_l2(sources[weight_inputs[j]], device) ? w.l2_rereads : w.dram_read) +=
                (tiles - 1) * stored * static_cast<double>(size_of(sources[weight_inputs[j]].dtype));
        }
        BodyTally activation_reads, epilogue_reads;
        tally(activation, s * k, dims, false, activation_reads);
        for (const RowStageKernel& stage : stages) tally(stage.body, s * k, dims, false, activation_reads);
        tally(epilogue, s * n, dims, false, epilogue_reads);
        for (std::size_t i = 0; i < activation_reads.elements.size(); ++i) {
            const double before = w.bytes();
            add_read(w, sources[i], activation_reads.elements[i], device);
            w.l2_rereads += (std::max(static_cast<double>(g.grid), 1.0) - 1) * (w.bytes() - before);  // every block makes the rows
        }
        for (std::size_t i = 0; i < epilogue_reads.elements.size(); ++i) add_read(w, sources[i], epilogue_reads.elements[i], device);
        add_write(w, s * n * static_cast<double>(size_of(out)), device);
        w.dram_in_flight = quant ? 16.0 * kQuantGemvLoads : static_cast<double>(weight_inputs.size() * layout.rows * layout.unroll) * 16.0;
        w.l2_in_flight = 16;
        // Each trip of a lane's main loop reads rows x unroll 16-byte vectors of every weight.
        if (!quant)
            w.loop_trips = tiles * n * k * static_cast<double>(size_of(sources[weight_inputs[0]].dtype)) /
                           (32.0 * 16 * layout.rows * layout.unroll);
        // Quantized, per weight element: a quarter of a 4-byte integer dot product per token and a share of the
        // unpacking, or a decode and an FMA per token.
        const double per_element = !quant ? 2 * s : quant->activations == Activations::Q8 ? 0.5 + 0.5 * s : 3 + 2 * s;
        w.flops = per_element * n * k * static_cast<double>(weight_inputs.size());
        return w;
    }

    void interpret(const KernelBuffers& b) const override {
        using namespace interpreter_detail;
        const std::int64_t s = tokens.eval(b.dims), n = rows.eval(b.dims), k = depth.eval(b.dims);
        HostBuffer a(DType::F32, static_cast<std::size_t>(s * k));
        std::vector<HostBuffer> stage_values;
        for (const RowStageKernel& stage : stages) stage_values.emplace_back(stage.dtype, 1);
        std::vector<BodyRunner> stage_bodies;
        for (const RowStageKernel& stage : stages) stage_bodies.emplace_back(stage.body, node, b, &stage_values);
        BodyRunner element(activation, node, b, &stage_values);
        for (std::int64_t t = 0; t < s; ++t) {
            for (std::size_t j = 0; j < stages.size(); ++j) {
                if (stages[j].folds) {
                    fold_into(stages[j].fold, stages[j].body.steps.back().dtype, stage_bodies[j], stage_values[j], 0, t * k, k, 1);
                } else {
                    stage_bodies[j].run(t * k);
                    stage_values[j].copy_element(0, stage_bodies[j].result(), 0);
                }
            }
            std::vector<double> row(static_cast<std::size_t>(k));
            for (std::int64_t e = 0; e < k; ++e) {
                element.run(t * k + e);
                row[static_cast<std::size_t>(e)] = element.result().as_double(0);
            }
            if (quant && quant->activations == Activations::Q8) round_to_q8_blocks(row);
            for (std::int64_t e = 0; e < k; ++e) a.store_double(static_cast<std::size_t>(t * k + e), row[static_cast<std::size_t>(e)]);
        }
        // Quantized weights decoded with io's decoders (the source decodes each group as they do).
        std::vector<std::vector<float>> decoded;
        if (quant)
            for (std::uint16_t input : weight_inputs) {
                const HostBuffer& blocks = *b.inputs[input];
                std::vector<std::byte> bytes(blocks.size());
                for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(static_cast<std::uint8_t>(blocks.as_double(i)));
                quantized_detail::check_blocks(quant->format, n, k, static_cast<std::int64_t>(bytes.size()), "cuda QuantizedMatmul", node);
                std::vector<float>& values = decoded.emplace_back(static_cast<std::size_t>(n * k));
                io::dequantize_blocks(quant->format, bytes, values);
            }
        std::vector<HostBuffer> accumulators(weight_inputs.size(), HostBuffer(DType::F32, 1));
        std::vector<Expression> row_start;
        for (const ShapeTracker& v : weight_views) row_start.push_back(v.index_expression().bind(b.dims));
        BodyRunner result(epilogue, node, b, &accumulators);
        for (std::int64_t t = 0; t < s; ++t)
            for (std::int64_t o = 0; o < n; ++o) {
                for (std::size_t j = 0; j < weight_inputs.size(); ++j) {
                    if (quant) {
                        float acc = 0;
                        for (std::int64_t e = 0; e < k; ++e)
                            acc = std::fma(static_cast<float>(a.as_double(static_cast<std::size_t>(t * k + e))),
                                           decoded[j][static_cast<std::size_t>(o * k + e)], acc);
                        accumulators[j].store_double(0, acc);
                        continue;
                    }
                    const HostBuffer& weight = *b.inputs[weight_inputs[j]];
                    const std::int64_t at = row_start[j].eval(b.dims, o * k);
                    check(at >= 0 && at + k <= static_cast<std::int64_t>(weight.size()), "cuda kernel",
                          "node {} reads weight row {} at {} of a {}-element buffer", node, o, at, weight.size());
                    float acc = 0;
                    for (std::int64_t e = 0; e < k; ++e)
                        acc = std::fma(static_cast<float>(a.as_double(static_cast<std::size_t>(t * k + e))),
                                       static_cast<float>(weight.as_double(static_cast<std::size_t>(at + e))), acc);
                    accumulators[j].store_double(0, acc);
                }
                result.run(t * n + o);
                b.out.copy_element(static_cast<std::size_t>(t * n + o), result.result(), 0);
            }
    }
};

// cuda.Gemv node `spec` as a kernel reading buffers of `dtypes`.
inline std::shared_ptr<const GemvKernel> gemv_kernel(const NodeSpec& spec, const GemvOp& op, std::span<const DType> dtypes,
                                                     std::uint32_t node) {
    using namespace lowering_detail;
    auto k = std::make_shared<GemvKernel>();
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->out = spec.dtype;
    k->node = node;
    k->layout = op.layout;
    k->quant = op.quant;
    const ShapeTracker& first_weight = spec.views[op.activation_inputs];
    if (op.quant) {
        for (std::uint16_t j = 0; j < op.weights; ++j)
            check(op.quant->layout == WeightLayout::Blocks && dtypes[op.activation_inputs + j] == DType::U8 &&
                      spec.views[op.activation_inputs + j].is_contiguous(),
                  "cuda QuantizedMatmul", "node {}: CUDA reads the contiguous blocks as stored (u8), got {}", node,
                  name_of(dtypes[op.activation_inputs + j]));
        k->rows = op.quant->rows;
        k->depth = op.quant->cols;
    } else {
        k->rows = first_weight.dim(0);
        k->depth = first_weight.dim(1);
    }
    k->tokens = 1;
    for (std::size_t a = 0; a + 1 < spec.shape.size(); ++a) k->tokens = k->tokens * spec.shape[a];
    const auto depth = k->depth.as_constant();
    k->tile_tokens = static_cast<int>(std::clamp<std::size_t>(
        kGemvSharedBudget / std::max<std::size_t>(k->staged_bytes(std::max<std::int64_t>(depth.value_or(1), 1)), 1), 1, 8));
    if (op.prologue) {
        k->prologue = true;
        NodeSpec rows = spec;
        rows.views.assign(spec.views.begin(), spec.views.begin() + op.activation_inputs);
        rows.shape = spec.views[0].dims();
        Kernel row = row_kernel(rows, *op.prologue, dtypes.first(op.activation_inputs), node);
        k->stages = std::move(row.stages);
        k->activation = std::move(row.body);
    } else {
        std::uint16_t x = load(k->activation, spec, dtypes, 0);
        if (dtypes[0] != DType::F32) k->activation.add(op_step(StepKind::Cast, OpKind::Cast, DType::F32, x));
    }
    for (std::uint16_t j = 0; j < op.weights; ++j) {
        k->weight_inputs.push_back(static_cast<std::uint16_t>(op.activation_inputs + j));
        k->weight_views.push_back(spec.views[op.activation_inputs + j]);
    }
    std::vector<std::uint16_t> slot;
    for (std::uint16_t j = 0; j < op.weights; ++j) {
        Step acc;
        acc.kind = StepKind::StageValue;
        acc.dtype = DType::F32;
        acc.input = j;
        slot.push_back(k->epilogue.add(std::move(acc)));
    }
    if (!op.epilogue) return k;
    for (std::size_t i = op.activation_inputs + op.weights; i < spec.views.size(); ++i)
        slot.push_back(load(k->epilogue, spec, dtypes, static_cast<std::uint16_t>(i)));
    add_program(k->epilogue, *op.epilogue, std::move(slot));
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/gemv_source.hpp"

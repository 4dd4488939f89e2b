#pragma once
// cuda.ExpertGemm: ExpertMatmul (lowering/expert_matmul.hpp) of bf16 experts
// on tensor cores, for steps where many rows choose each expert (a prefill):
// a block takes kGemmColumns output columns of one chosen expert, whose
// rows are 16-byte vectors of bf16 (K a multiple of 8, aligned),
// (expert_rows_source.hpp) and all the rows that chose it, kGemmRows at a
// time, so an expert's weights are read once per kGemmRows of its rows (the
// expert GEMV reads them once per 8 or fewer). Per kGemmDepth-wide slice of
// K the block stages the rows' activations and its weight rows in shared
// memory as bf16, and each of its 8 warps multiplies all the rows by its 16
// columns with mma.sync m16n8k16 (f32 accumulation). The weight rows (and
// bf16 activations stored in order) are copied without passing through
// registers (cp.async) into one of kGemmStages buffers: the next slice's
// copies are in flight while the current slice is multiplied. Each f32 activation is
// carried as three bf16 parts, hi = bf16(a), mid = bf16(a - hi) and
// lo = a - hi - mid (exact: each part takes 8 of the 24 significand bits), and
// each part is multiplied in: the products are exact, so the op computes
// ExpertMatmul to within f32 accumulation, not bf16 rounding, for a third of
// the tensor cores' rate. Activations the model rounded to bf16
// (narrow_activations) are read as stored, one part, at the full rate. The
// source is expert_gemm_source.hpp.
#include <algorithm>
#include <cmath>
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/expert_gemv_kernel.hpp"
#include "luminal/cuda/expert_rows_source.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/lowering/expert_matmul.hpp"

namespace luminal::cuda {

inline constexpr int kGemmRows = 64;      // rows of a tile: 4 m16 tiles
inline constexpr int kGemmColumns = 128;  // output columns a block takes: 16 per warp, two n8 tiles
inline constexpr int kGemmDepth = 32;     // K values a slice stages: two k16 steps
inline constexpr int kGemmStride = 40;    // bf16 values a staged row takes (padded against bank conflicts)
inline constexpr int kGemmParts = 3;      // bf16 parts of an f32 activation
inline constexpr int kGemmStages = 2;     // slices in shared memory: one multiplied while the next is copied
// 16-byte vectors a thread of a 256-thread block copies per slice, all in flight together: weights and activations.
inline constexpr int kGemmWeightVectors = kGemmColumns * kGemmDepth / 8 / kThreadsPerBlock;
inline constexpr int kGemmActivationVectors = kGemmRows * kGemmDepth / 8 / kThreadsPerBlock;

// bf16 parts an activation of `dtype` is multiplied in as: a bf16 one as stored, an f32 one exactly.
inline constexpr int gemm_parts(DType dtype) { return dtype == DType::BF16 ? 1 : kGemmParts; }
// Shared memory the slices take: the tile's activations (a buffer per stage where they are copied as stored, else
// one per part), then the block's weight rows, a buffer per stage.
inline constexpr std::size_t gemm_stage_bytes(int activation_tiles) {
    return (static_cast<std::size_t>(activation_tiles) * kGemmRows + kGemmStages * kGemmColumns) * kGemmStride * sizeof(std::uint16_t);
}

struct ExpertGemmOp {
    static constexpr std::string_view name = "cuda.ExpertGemm";
    int parts = kGemmParts;  // of each activation, as gemm_parts() of its dtype
    bool operator==(const ExpertGemmOp&) const = default;
    std::size_t hash() const { return 0x45474d4du + static_cast<std::size_t>(parts); }
    std::string attributes() const { return parts == 1 ? "bf16 activations" : ""; }
    Shape shape(std::span<const ShapeTracker> inputs) const { return {inputs[2].dim(0), inputs[1].dim(1)}; }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    double flops(const OpCostQuery& q) const {
        return 2 * parts * q.elements(q.shape) * static_cast<double>(std::max<std::int64_t>(q.inputs[1].dim(2).eval(q.dims), 0));
    }
    // ExpertMatmul's: the kernel differs from it by f32 rounding only.
    void reference(const ReferenceCall& call) const { ExpertMatmulOp{}.reference(call); }
};

struct ExpertGemmKernel final : CustomKernel {
    std::vector<DType> inputs;        // x, W (bf16), experts
    std::vector<ShapeTracker> views;  // x (R * K elements in order), W [E, N, K], experts (R in order)
    Expression rows, experts, outputs, depth;  // R, E, N, K
    std::uint32_t node = 0;

    std::string source() const override;  // expert_gemm_source.hpp
    std::string_view entry() const override { return "luminal_expert_gemm"; }
    int parts() const { return gemm_parts(inputs[0]); }
    // bf16 activations stored in order, each row whole 16-byte vectors, are copied as stored, as the weights are.
    bool copies_activations() const {
        const auto k = depth.as_constant();
        return parts() == 1 && views[0].is_contiguous() && k && *k % 8 == 0;
    }
    int activation_tiles() const { return copies_activations() ? kGemmStages : parts(); }

    static std::int64_t columns(std::int64_t n) { return (n + kGemmColumns - 1) / kGemmColumns; }
    std::int64_t live_blocks(const DynMap& dims) const {
        return std::min(experts.eval(dims), rows.eval(dims)) * columns(outputs.eval(dims));
    }
    KernelGeometry geometry(const DynMap& dims, int) const override {
        KernelGeometry g;
        g.grid = static_cast<unsigned>(std::max<std::int64_t>(live_blocks(dims), 0));
        g.block = kThreadsPerBlock;
        g.shared_bytes = gemm_stage_bytes(activation_tiles()) + expert_grouping_shared_bytes(experts.eval(dims));
        return g;
    }
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double r = static_cast<double>(rows.eval(dims)), e = static_cast<double>(experts.eval(dims)),
                     n = static_cast<double>(outputs.eval(dims)), k = static_cast<double>(depth.eval(dims));
        const double slots = std::min(e, r), tiles = slots > 0 ? std::ceil(r / slots / kGemmRows) : 0;
        w.grid = std::min<std::int64_t>(g.grid, static_cast<std::int64_t>(std::max<std::int64_t>(live_blocks(dims), 0)));
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes;
        // Each chosen expert once per tile of its rows (rows spread evenly over the slots).
        add_expert_reads(w, sources, 1, slots * n * k, tiles, r, k, static_cast<double>(columns(static_cast<std::int64_t>(n))),
                         static_cast<double>(w.grid), device);
        add_write(w, r * n * sizeof(float), device);
        w.dram_in_flight = 16.0 * kGemmWeightVectors * kGemmStages;
        w.l2_in_flight = copies_activations() ? 16.0 * kGemmActivationVectors * kGemmStages : 16;
        // A tile's m16 tiles that hold rows are multiplied, once per part of the activations.
        const double rows_multiplied = slots > 0 ? std::min(std::ceil(r / slots / 16) * 16, tiles * kGemmRows) : 0;
        w.mma_flops = 2 * parts() * slots * rows_multiplied * n * k;
        return w;
    }
    // The parts add up to each activation exactly: each output the dot product of the f32 activations and the weights, in double.
    void interpret(const KernelBuffers& b) const override {
        const ReferenceInput x(*b.inputs[0], views[0], b.dims, node), w(*b.inputs[1], views[1], b.dims, node),
            picks(*b.inputs[2], views[2], b.dims, node);
        const std::int64_t r_count = rows.eval(b.dims), e_count = experts.eval(b.dims), n = outputs.eval(b.dims), k = depth.eval(b.dims);
        for (std::int64_t r = 0; r < r_count; ++r) {
            const std::int64_t e = picks.i(r);
            check(e >= 0 && e < e_count, ExpertMatmulOp::name.data(), "node {}: row {} picks expert {}, outside [0, {})", node, r, e,
                  e_count);
            for (std::int64_t o = 0; o < n; ++o) {
                double acc = 0;
                for (std::int64_t i = 0; i < k; ++i) acc += static_cast<double>(static_cast<float>(x.f(r * k + i))) * w.f((e * n + o) * k + i);
                b.out.store_double(static_cast<std::size_t>(r * n + o), acc);
            }
        }
    }
};

// cuda.ExpertGemm node `spec` as a kernel reading buffers of `dtypes`.
inline std::shared_ptr<const ExpertGemmKernel> expert_gemm_kernel(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t node) {
    constexpr const char* name = "cuda ExpertGemm";
    check(dtypes.size() == 3 && spec.views.size() == 3, name, "node {}: needs x, the weights and the experts", node);
    const ShapeTracker &w = spec.views[1], &picks = spec.views[2];
    check(dtypes[0] == DType::F32 || dtypes[0] == DType::BF16, name, "node {}: activations must be f32 or bf16, got {}", node,
          name_of(dtypes[0]));
    check(dtypes[1] == DType::BF16 && expert_gemv_detail::streams_rows(w, dtypes[1]), name,
          "node {}: the weights must be bf16 [experts, out, in] whose rows are 16-byte vectors, got {}", node, name_of(dtypes[1]));
    check(!is_float(dtypes[2]) && !picks.is_padded_or_masked(), name, "node {}: experts must be unpadded integers, got {}", node,
          name_of(dtypes[2]));
    auto k = std::make_shared<ExpertGemmKernel>();
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->views = spec.views;
    k->rows = product(picks.dims());
    k->experts = w.dim(0);
    k->outputs = w.dim(1);
    k->depth = w.dim(2);
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

#include "luminal/cuda/expert_gemm_source.hpp"

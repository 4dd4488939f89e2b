#pragma once
// The launches one execution of a plan enqueues, in order, without a device:
// which entry of which node, its grid and block, and the memsets and copies
// between them. The CUDA runtime turns each into a driver call (adding the
// buffers' addresses), the plan report prices each one, so what the report
// shows is what the runtime runs. Grids are planned for the dims' bucket
// (each dim rounded up to a power of two: kernels stride over any grid), so
// every execution of one bucket enqueues the same work and replays one graph.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "luminal/cuda/blas_matmul_op.hpp"
#include "luminal/cuda/plan.hpp"

namespace luminal::cuda {

// Which compiled entry of a node a kernel launch runs.
enum class Entry : std::uint8_t { Main = 0, ScatterClaim = 1, ScatterWrite = 2, Vector = 3, Update = 4 };
inline constexpr std::size_t kEntries = 5;

struct PlannedLaunch {
    // Group: the kernels of `members` as one launch (launch_groups.hpp), `node` the first member's.
    // Blas: `node`'s product, and with `members` the rest of its batch's (blas_batches.hpp) in the same call.
    enum class Kind : std::uint8_t { Kernel, Memset, Copy, Blas, Group } kind = Kind::Kernel;
    std::uint32_t node = 0;
    Entry entry = Entry::Main;
    unsigned grid = 0, block = 0;
    std::size_t shared_bytes = 0;  // dynamic shared memory per block
    std::int64_t units = 0;        // work units a custom kernel's grid shares out
    std::size_t bytes = 0;        // Memset, Copy
    std::uint32_t carried_input = 0;  // Copy: the carried Output `node` into this Input's buffer
    std::vector<PlannedLaunch> members;  // Group, a batched Blas
    std::uint32_t group = kNoGroup;      // Group: the plan's group
    friend bool operator==(const PlannedLaunch&, const PlannedLaunch&) = default;
};

// The dims memory and grids are planned for: each rounded up to a power of two.
inline DynMap size_bucket(const DynMap& dims) {
    DynMap bucket;
    for (auto [c, v] : dims.entries())
        bucket.set(c, v > 1 ? static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(v))) : v);
    return bucket;
}

inline unsigned grid_for(std::int64_t units, std::int64_t per_block, int multiprocessors) {
    if (units <= 0) return 0;
    const std::int64_t blocks = (units + per_block - 1) / per_block;
    return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, std::int64_t{multiprocessors} * 32));
}

// Grid and block of a generated kernel at `dims`: a thread, a warp or a block per output (a row for Row kernels).
inline PlannedLaunch kernel_launch(std::uint32_t node, Entry entry, const Kernel& k, const DynMap& dims, int multiprocessors) {
    PlannedLaunch l;
    l.node = node;
    l.entry = entry;
    l.block = kThreadsPerBlock;
    std::int64_t count = k.count.eval(dims);
    if (k.shape == Kernel::Shape::Row) count = k.extent.eval(dims) > 0 ? count / k.extent.eval(dims) : 0;
    if (k.shape == Kernel::Shape::Elementwise || k.strategy == ReduceStrategy::ThreadPerOutput)
        l.grid = grid_for(count, kThreadsPerBlock, multiprocessors);
    else if (k.strategy == ReduceStrategy::WarpPerOutput) l.grid = grid_for(count, kThreadsPerBlock / 32, multiprocessors);
    else l.grid = grid_for(count, 1, multiprocessors);
    return l;
}

// Whether a Blas node's operands, as evaluated at `dims`, suit cuBLASLt (else it runs the generated matmul kernel).
inline bool blas_runs_library(const NodeSpec& spec, const DynMap& dims) {
    return blas_accepts(blas_operand(spec.views[0], dims)) && blas_accepts(blas_operand(spec.views[1], dims));
}

// The generated matmul a Blas node runs where cuBLASLt cannot describe its operands.
inline Kernel blas_fallback_kernel(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t id) {
    return lowering_detail::matmul_kernel(spec, dtypes, id);
}

// The launches node `id` makes at `dims` (grids for `bucket`).
inline void append_node_launches(std::vector<PlannedLaunch>& out, const PlannedNode& p, const NodeSpec& spec,
                                 std::span<const DType> dtypes, std::uint32_t id, const DynMap& dims, const DynMap& bucket,
                                 int multiprocessors) {
    if (p.role == PlannedNode::Role::Input || p.role == PlannedNode::Role::Constant || p.aliases_source) return;
    if (p.role == PlannedNode::Role::HostOp) {
        if (blas_runs_library(spec, dims)) {
            PlannedLaunch l;
            l.kind = PlannedLaunch::Kind::Blas;
            l.node = id;
            out.push_back(l);
        } else {
            const auto* blas = spec.payload_as<BlasMatmulOp>();
            check(!blas || !blas->adds_addend, "cuda plan", "node {}: cuBLASLt cannot describe the operands of a product with an addend",
                  id);
            out.push_back(kernel_launch(id, Entry::Main, blas_fallback_kernel(spec, dtypes, id), dims, multiprocessors));
        }
        return;
    }
    if (p.role == PlannedNode::Role::Scatter) {
        if (p.kernel) out.push_back(kernel_launch(id, Entry::Main, *p.kernel, bucket, multiprocessors));
        PlannedLaunch clear;
        clear.kind = PlannedLaunch::Kind::Memset;
        clear.node = id;
        clear.bytes = static_cast<std::size_t>(std::max(numel_of(spec.shape, dims, id), numel_of(spec.shape, bucket, id))) *
                      sizeof(std::int32_t);
        out.push_back(clear);
        const std::int64_t count = p.scatter->count.eval(dims);
        check(count < std::numeric_limits<std::int32_t>::max(), "CudaRuntime", "node {}: {} scattered elements", id, count);
        PlannedLaunch claim;
        claim.node = id;
        claim.entry = Entry::ScatterClaim;
        claim.block = kThreadsPerBlock;
        claim.grid = count == 0 ? 0 : grid_for(std::max(count, p.scatter->count.eval(bucket)), kThreadsPerBlock, multiprocessors);
        out.push_back(claim);
        claim.entry = Entry::ScatterWrite;
        out.push_back(claim);
        return;
    }
    if (p.role == PlannedNode::Role::Update) {
        if (p.kernel) out.push_back(kernel_launch(id, Entry::Main, *p.kernel, bucket, multiprocessors));
        out.push_back(kernel_launch(id, Entry::Update, *p.update, bucket, multiprocessors));
        return;
    }
    if (p.custom) {
        const KernelGeometry g = p.custom->geometry(bucket, multiprocessors);
        PlannedLaunch l;
        l.node = id;
        l.grid = g.grid;
        l.block = g.block;
        l.shared_bytes = g.shared_bytes;
        l.units = g.units;
        out.push_back(l);
        return;
    }
    const bool vector = has_vector_form(*p.kernel) && vector_launch_ok(*p.kernel, dims);
    out.push_back(kernel_launch(id, vector ? Entry::Vector : Entry::Main, *p.kernel, bucket, multiprocessors));
}

inline std::vector<DType> source_dtypes(const std::vector<ProgramNode>& nodes, std::uint32_t id) {
    std::vector<DType> dtypes;
    for (std::uint32_t s : nodes[id].sources) dtypes.push_back(nodes[s].spec.dtype);
    return dtypes;
}

// The launches of one execution at `dims`. `carried_fits(output, input)`:
// whether an out-of-place carried output is copied into its input's buffer
// inside the execution (otherwise the runtime hands it over after).
template <typename CarriedFits>
std::vector<PlannedLaunch> plan_launches(const Plan& plan, const std::vector<ProgramNode>& nodes, const DynMap& dims,
                                         int multiprocessors, CarriedFits carried_fits) {
    const DynMap bucket = size_bucket(dims);
    std::vector<PlannedLaunch> out;
    for (std::uint32_t id = 0; id < nodes.size(); ++id) {
        const std::uint32_t group = plan.group.empty() ? kNoGroup : plan.group[id];
        const std::uint32_t batch = plan.batch.empty() ? kNoBatch : plan.batch[id];
        if (batch != kNoBatch) {
            if (batch != id) continue;  // its leader's launch computes it
            const std::vector<std::uint32_t> members = batch_members(plan.batch, id);
            const std::size_t first = out.size();
            for (std::uint32_t m : members)
                append_node_launches(out, plan.nodes[m], nodes[m].spec, source_dtypes(nodes, m), m, dims, bucket, multiprocessors);
            if (out[first].kind == PlannedLaunch::Kind::Blas) {
                for (std::size_t i = first + 1; i < out.size(); ++i) out[first].members.push_back(out[i]);
                out.resize(first + 1);
            }
            continue;
        }
        if (group == kNoGroup) {
            append_node_launches(out, plan.nodes[id], nodes[id].spec, source_dtypes(nodes, id), id, dims, bucket, multiprocessors);
            continue;
        }
        if (out.empty() || out.back().kind != PlannedLaunch::Kind::Group || out.back().group != group) {
            PlannedLaunch g;
            g.kind = PlannedLaunch::Kind::Group;
            g.group = group;
            g.node = id;
            g.block = kThreadsPerBlock;
            out.push_back(std::move(g));
        }
        PlannedLaunch& g = out.back();
        append_node_launches(g.members, plan.nodes[id], nodes[id].spec, source_dtypes(nodes, id), id, dims, bucket, multiprocessors);
        const PlannedLaunch& member = g.members.back();
        g.grid += member.grid;
        g.units += member.units > 0 ? member.units : member.grid;
        g.shared_bytes = std::max(g.shared_bytes, member.shared_bytes);
    }
    for (auto [output, input] : plan.carried) {
        if (plan.nodes[output].aliases_source || !carried_fits(output, input)) continue;
        PlannedLaunch copy;
        copy.kind = PlannedLaunch::Kind::Copy;
        copy.node = output;
        copy.carried_input = input;
        copy.bytes = static_cast<std::size_t>(numel_of(nodes[output].spec.shape, dims, output)) * size_of(nodes[output].spec.dtype);
        out.push_back(copy);
    }
    return out;
}

}  // namespace luminal::cuda

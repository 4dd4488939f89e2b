#pragma once
// What each launch of a plan moves and computes (kernel_work.hpp), and its
// modelled cost, as the cost model and the plan report see it.
#include <span>
#include <vector>

#include "luminal/cuda/kernel_work.hpp"
#include "luminal/cuda/launch_plan.hpp"

namespace luminal::cuda {

// The work of planned launch `l` of node `spec` (planned as `p`) reading `sources`.
inline LaunchWork launch_work(const PlannedLaunch& l, const PlannedNode& p, const NodeSpec& spec,
                              std::span<const SourceInfo> sources, const DynMap& dims, const DeviceSpec& device) {
    LaunchWork w;
    const double out_bytes = static_cast<double>(numel_of(spec.shape, dims, l.node)) * static_cast<double>(size_of(spec.dtype));
    switch (l.kind) {
        case PlannedLaunch::Kind::Memset:
            w.kind = LaunchWork::Kind::Memset;
            add_write(w, static_cast<double>(l.bytes), device);
            return w;
        case PlannedLaunch::Kind::Copy:
            w.kind = LaunchWork::Kind::Copy;
            w.dram_read = w.dram_write = static_cast<double>(l.bytes);
            return w;
        case PlannedLaunch::Kind::Blas: {
            // A batch's members are this product with other weights of the same form: the activation is read
            // once, each member's weights (and addend) and output once each.
            const double members = 1 + static_cast<double>(l.members.size());
            w.kind = LaunchWork::Kind::Library;
            for (std::size_t i = 0; i < sources.size(); ++i) {
                const SourceInfo read{sources[i].dtype, sources[i].elements * (i == 0 ? 1 : members), sources[i].bound};
                add_read(w, read, work_detail::view_elements(spec.views[i], dims) * (i == 0 ? 1 : members), device);
            }
            add_write(w, out_bytes * members, device);
            w.flops = spec.op.payload->flops(OpCostQuery{spec.views, spec.shape, spec.dtype, dims}) * members;
            w.tensor_cores = sources[0].dtype == DType::BF16 || sources[0].dtype == DType::F16;
            const BlasOperand a = blas_operand(spec.views[0], dims), b = blas_operand(spec.views[1], dims);
            const double rows_by_cols = static_cast<double>(a.rows) * static_cast<double>(b.rows);
            w.gemm = {static_cast<double>(a.rows), static_cast<double>(b.rows), static_cast<double>(a.k),
                      rows_by_cols > 0 ? members * out_bytes / static_cast<double>(size_of(spec.dtype)) / rows_by_cols : 0.0};
            return w;
        }
        case PlannedLaunch::Kind::Group: throw Error("cuda plan", "a launch group is priced by group_work over its members");
        case PlannedLaunch::Kind::Kernel: break;
    }
    if (l.entry == Entry::ScatterClaim || l.entry == Entry::ScatterWrite) {
        const double count = static_cast<double>(p.scatter->count.eval(dims));
        add_read(w, sources[1], count, device);
        if (l.entry == Entry::ScatterWrite) add_read(w, sources[2], count, device);
        add_write(w, count * static_cast<double>(l.entry == Entry::ScatterClaim ? sizeof(std::int32_t) : size_of(spec.dtype)), device);
        w.l2_in_flight = l.entry == Entry::ScatterClaim ? 8 : 12;
        w.flops = count;
    } else if (l.entry == Entry::Update) {
        w = kernel_work(*p.update, false, sources, dims, device);
    } else if (p.custom) {
        return p.custom->work(dims, sources, KernelGeometry{l.grid, l.block, l.shared_bytes, l.units}, device);
    } else if (p.role == PlannedNode::Role::HostOp) {
        std::vector<DType> dtypes;
        for (const SourceInfo& s : sources) dtypes.push_back(s.dtype);
        w = kernel_work(blas_fallback_kernel(spec, dtypes, l.node), false, sources, dims, device);
    } else {
        const bool copy = p.role == PlannedNode::Role::Scatter || p.role == PlannedNode::Role::Update;
        w = kernel_work(*p.kernel, l.entry == Entry::Vector, copy ? sources.first(1) : sources, dims, device);
    }
    w.grid = l.grid;
    w.block = static_cast<int>(l.block);
    return w;
}

// The sources of program node `id` as a launch of the plan sees them.
inline std::vector<SourceInfo> plan_sources_of(const Plan& plan, const std::vector<ProgramNode>& nodes, std::uint32_t id,
                                               const DynMap& dims) {
    std::vector<SourceInfo> out;
    for (std::uint32_t s : nodes[id].sources) {
        const PlannedNode& p = plan.nodes[s];
        // A node written in place into a carried input (a KV cache after this step's row) is that input's
        // data: earlier steps wrote all but a row of it, so it comes from DRAM as bound data does.
        const bool bound = p.role == PlannedNode::Role::Input || p.role == PlannedNode::Role::Constant || p.aliases_source ||
                           p.in_place_input.has_value();
        out.push_back({nodes[s].spec.dtype, static_cast<double>(numel_of(nodes[s].spec.shape, dims, s)), bound});
    }
    return out;
}

// The members of a group run side by side as one launch: their bytes and
// arithmetic add up, their threads share the device, each thread keeps its
// own member's loads in flight, and the longest chain of round trips is the
// group's.
inline LaunchWork group_work(const std::vector<LaunchWork>& members) {
    LaunchWork w;
    double threads = 0, dram = 0, l2 = 0;
    for (const LaunchWork& m : members) {
        w.grid += m.grid;
        w.units += m.units > 0 ? m.units : m.grid;
        w.shared_bytes = std::max(w.shared_bytes, m.shared_bytes);
        w.registers = std::max(w.registers, m.registers);
        w.dram_read += m.dram_read;
        w.dram_write += m.dram_write;
        w.l2_read += m.l2_read;
        w.l2_write += m.l2_write;
        w.l2_rereads += m.l2_rereads;
        w.flops += m.flops;
        w.mma_flops += m.mma_flops;
        w.dram_round_trips = std::max(w.dram_round_trips, m.dram_round_trips);
        w.l2_round_trips = std::max(w.l2_round_trips, m.l2_round_trips);
        const double t = static_cast<double>(m.grid) * m.block;
        threads += t;
        dram += t * m.dram_in_flight;
        l2 += t * m.l2_in_flight;
    }
    w.dram_in_flight = threads > 0 ? dram / threads : 0;
    w.l2_in_flight = threads > 0 ? l2 / threads : 0;
    return w;
}

// Modelled device seconds of every launch of one execution of a plan, replayed as a CUDA graph.
inline std::vector<std::pair<LaunchWork, LaunchEstimate>> plan_costs(const Plan& plan, const std::vector<ProgramNode>& nodes,
                                                                     const std::vector<PlannedLaunch>& launches,
                                                                     const DynMap& dims, const DeviceSpec& device) {
    std::vector<std::pair<LaunchWork, LaunchEstimate>> out;
    auto work_of = [&](const PlannedLaunch& l) {
        const std::vector<SourceInfo> sources = plan_sources_of(plan, nodes, l.node, dims);
        return launch_work(l, plan.nodes[l.node], nodes[l.node].spec, sources, dims, device);
    };
    for (const PlannedLaunch& l : launches) {
        LaunchWork w;
        if (l.kind == PlannedLaunch::Kind::Group) {
            std::vector<LaunchWork> members;
            for (const PlannedLaunch& m : l.members) members.push_back(work_of(m));
            w = group_work(members);
        } else {
            w = work_of(l);
        }
        out.emplace_back(w, estimate_launch(w, device, true));
    }
    return out;
}

}  // namespace luminal::cuda

#pragma once
// A Program as the CUDA backend runs it: for each node, whether it is bound
// data (Input, Constant), a generated kernel, a scatter (a dest copy and the
// two-pass scatter kernel), or a host op (cuBLASLt); when each result dies;
// and which carried Scatter writes straight into its Input's buffer (a KV
// cache step writes only its new rows). The device runtime and the host
// emulator run the same plan, so what CI checks on the host is what runs.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "luminal/cuda/kernel_lowering.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/cuda/vector_reduce_source.hpp"
#include "luminal/graph/program.hpp"

namespace luminal::cuda {

struct PlannedNode {
    enum class Role : std::uint8_t { Input, Constant, Kernel, Scatter, HostOp };
    Role role = Role::Input;
    std::optional<Kernel> kernel;          // Kernel; Scatter: the dest copy unless in place
    std::optional<ScatterKernel> scatter;  // Scatter
    std::optional<std::uint32_t> in_place_input;  // Scatter writing into this carried Input's buffer
    bool aliases_source = false;                  // Output whose source's buffer it is (an in-place Scatter)
};

struct Plan {
    std::vector<PlannedNode> nodes;
    std::vector<std::uint32_t> last_use;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> carried;  // (Output, Input)
};

namespace plan_detail {

inline void plan_in_place(const std::vector<ProgramNode>& nodes, Plan& plan) {
    for (auto [output, input] : plan.carried) {
        const ProgramNode& out = nodes[output];
        const std::uint32_t s = out.sources[0];
        const ProgramNode& scatter = nodes[s];
        const NodeSpec& in = nodes[input].spec;
        const bool in_place = plan.nodes[s].role == PlannedNode::Role::Scatter && scatter.sources[0] == input &&
                              scatter.sources[1] != input && scatter.sources[2] != input && plan.last_use[input] == s &&
                              scatter.spec.views[0].is_contiguous() && product(scatter.spec.views[0].dims()) == product(in.shape) &&
                              scatter.spec.dtype == in.dtype && out.spec.dtype == in.dtype &&
                              out.spec.views[0].is_contiguous() && product(scatter.spec.shape) == product(out.spec.shape);
        if (!in_place) continue;
        plan.nodes[s].in_place_input = input;
        plan.nodes[s].kernel.reset();
        plan.nodes[output].aliases_source = true;
        plan.nodes[output].kernel.reset();
    }
}

}  // namespace plan_detail

inline Plan plan_program(const Program& program) {
    Plan plan;
    const auto& nodes = program.nodes;
    plan.nodes.resize(nodes.size());
    plan.last_use.resize(nodes.size());
    plan.carried = carried_indices(program);
    for (std::uint32_t id = 0; id < nodes.size(); ++id) {
        const ProgramNode& node = nodes[id];
        check(node.sources.size() == node.spec.views.size(), "cuda::plan", "node {} has {} sources but {} views", id,
              node.sources.size(), node.spec.views.size());
        plan.last_use[id] = id;
        std::vector<DType> dtypes;
        for (std::uint32_t s : node.sources) {
            check(s < id, "cuda::plan", "node {} reads node {}, which does not come before it", id, s);
            plan.last_use[s] = std::max(plan.last_use[s], id);
            dtypes.push_back(nodes[s].spec.dtype);
        }
        PlannedNode& p = plan.nodes[id];
        const auto kind = static_cast<OpKind>(node.spec.kind);
        if (!node.spec.op.payload && kind == OpKind::Input) {
            p.role = PlannedNode::Role::Input;
        } else if (!node.spec.op.payload && kind == OpKind::Constant) {
            p.role = PlannedNode::Role::Constant;
        } else if (!node.spec.op.payload && kind == OpKind::Scatter) {
            p.role = PlannedNode::Role::Scatter;
            p.kernel = scatter_copy_kernel(node.spec, dtypes, id);
            p.scatter = scatter_kernel(node.spec, dtypes, id);
        } else if (auto kernel = kernel_for(node.spec, dtypes, id)) {
            p.role = PlannedNode::Role::Kernel;
            p.kernel = std::move(kernel);
        } else if (node.spec.op.payload) {
            p.role = PlannedNode::Role::HostOp;
        } else {
            throw Error("cuda::plan", fmt::format("node {}: no CUDA kernel for op {}", id, symbol_name(node.spec.kind)));
        }
    }
    plan_detail::plan_in_place(nodes, plan);
    return plan;
}

// Every distinct generated source of a plan: what NVRTC compiles for it.
inline std::vector<std::string> plan_sources(const Plan& plan) {
    std::vector<std::string> out;
    auto add = [&](std::string source) {
        if (std::find(out.begin(), out.end(), source) == out.end()) out.push_back(std::move(source));
    };
    for (const PlannedNode& p : plan.nodes) {
        if (p.kernel) add(kernel_source(*p.kernel));
        if (p.kernel)
            if (auto vector = vector_kernel_source(*p.kernel)) add(std::move(*vector));
        if (p.scatter) add(kernel_source(*p.scatter));
    }
    return out;
}

}  // namespace luminal::cuda

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

#include "luminal/cuda/blas_batches.hpp"
#include "luminal/cuda/custom_kernels.hpp"
#include "luminal/cuda/kernel_lowering.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/cuda/vector_reduce_source.hpp"
#include "luminal/cuda/write_at_op.hpp"
#include "luminal/graph/program.hpp"

namespace luminal::cuda {

struct PlannedNode {
    // Update: input 0's data with some elements rewritten (a cache write): a copy unless in place, then `update`.
    enum class Role : std::uint8_t { Input, Constant, Kernel, Scatter, Update, HostOp };
    Role role = Role::Input;
    std::optional<Kernel> kernel;          // Kernel; Scatter, Update: the dest copy unless in place
    std::optional<Kernel> update;          // Update: the kernel writing the new elements
    std::optional<ScatterKernel> scatter;  // Scatter
    std::shared_ptr<const CustomKernel> custom;  // Kernel: one with its own thread layout
    std::optional<std::uint32_t> in_place_input;  // Scatter writing into this carried Input's buffer
    bool aliases_source = false;                  // Output whose source's buffer it is (an in-place Scatter)
};

inline constexpr std::uint32_t kNoGroup = ~std::uint32_t{0};

struct Plan {
    std::vector<PlannedNode> nodes;
    std::vector<std::uint32_t> last_use;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> carried;  // (Output, Input)
    // Consecutive independent one-launch kernels run as one launch (a group:
    // q, k and v projections, say); group[n] is node n's (kNoGroup: its own
    // launch). batch[n]: the leader of the batched product node n belongs to
    // (blas_batches.hpp; kNoBatch: none). step[n]: the launch it runs in,
    // last_step[n] the last launch that reads it, which liveness counts in
    // (results read and written by one launch cannot share memory).
    std::vector<std::uint32_t> group, batch, step, last_step;
};

namespace plan_detail {

// Whether an elementwise kernel reads input `k` only at the element it writes: it may then write over it.
inline bool reads_only_its_element(const Kernel& kernel, std::uint16_t k, const Expression& elements) {
    if (kernel.shape != Kernel::Shape::Elementwise || kernel.store_at || !(kernel.count == elements)) return false;
    return std::all_of(kernel.body.steps.begin(), kernel.body.steps.end(), [&](const Step& step) {
        return step.kind != StepKind::Load || step.input != k ||
               (step.at == kAtElement && step.view.is_contiguous() && product(step.view.dims()) == elements);
    });
}

// A carried input's update writes the input's buffer, where nothing after it
// reads the input: a Scatter or cuda.WriteAt (a KV cache step writes only its
// new rows), or an elementwise kernel reading each element only where it
// writes it (a cache length advanced by one), which then needs no copy back.
inline void plan_in_place(const std::vector<ProgramNode>& nodes, Plan& plan) {
    for (auto [output, input] : plan.carried) {
        const ProgramNode& out = nodes[output];
        const std::uint32_t s = out.sources[0];
        const ProgramNode& update = nodes[s];
        const NodeSpec& in = nodes[input].spec;
        PlannedNode& planned = plan.nodes[s];
        const auto at = std::find(update.sources.begin(), update.sources.end(), input);
        if (at == update.sources.end() || std::count(at, update.sources.end(), input) != 1 || plan.last_use[input] != s ||
            update.spec.dtype != in.dtype || out.spec.dtype != in.dtype || !out.spec.views[0].is_contiguous() ||
            !(product(update.spec.shape) == product(out.spec.shape)) || !(product(update.spec.shape) == product(in.shape)))
            continue;
        const std::uint16_t k = static_cast<std::uint16_t>(at - update.sources.begin());
        const bool scatters = (planned.role == PlannedNode::Role::Scatter || planned.role == PlannedNode::Role::Update) && k == 0 &&
                              update.spec.views[0].is_contiguous() && product(update.spec.views[0].dims()) == product(in.shape);
        const bool elementwise = planned.role == PlannedNode::Role::Kernel && planned.kernel &&
                                 reads_only_its_element(*planned.kernel, k, product(in.shape));
        if (!scatters && !elementwise) continue;
        planned.in_place_input = input;
        if (scatters) planned.kernel.reset();  // the dest copy
        else planned.kernel->overwrites = k;
        plan.nodes[output].aliases_source = true;
        plan.nodes[output].kernel.reset();
    }
}

inline constexpr std::size_t kMaxGroupMembers = 8;

// Whether node n is one launch of a fixed kernel (no dims-dependent form) that may share a launch.
inline bool groupable(const PlannedNode& p) {
    if (p.role == PlannedNode::Role::Update) return p.in_place_input.has_value();
    if (p.role != PlannedNode::Role::Kernel || p.aliases_source) return false;
    return p.custom || (p.kernel && !has_vector_form(*p.kernel));
}

// The buffer a node's launch writes: a carried input's when in place, else its own.
inline std::uint32_t written_buffer(const Plan& plan, std::uint32_t n) {
    return plan.nodes[n].in_place_input ? *plan.nodes[n].in_place_input : n;
}

inline void assign_groups(const std::vector<ProgramNode>& nodes, Plan& plan) {
    plan.group.assign(nodes.size(), kNoGroup);
    plan.step.assign(nodes.size(), 0);
    std::vector<std::uint32_t> members;
    std::uint32_t groups = 0, step = 0;
    auto close = [&] {
        if (members.size() > 1)
            for (std::uint32_t m : members) plan.group[m] = groups;
        if (members.size() > 1) ++groups;
        if (!members.empty()) ++step;
        members.clear();
    };
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
        const PlannedNode& p = plan.nodes[n];
        if (p.role == PlannedNode::Role::Input || p.role == PlannedNode::Role::Constant || p.aliases_source) {
            plan.step[n] = step;
            continue;
        }
        if (const std::uint32_t leader = plan.batch[n]; leader != kNoBatch && leader != n) {
            plan.step[n] = plan.step[leader];  // computed by its leader's launch
            continue;
        }
        if (!groupable(p)) {
            close();
            plan.step[n] = step++;
            continue;
        }
        // Independent of the members: it reads nothing they write and writes nothing they read.
        bool independent = members.size() < kMaxGroupMembers;
        for (std::uint32_t m : members) {
            for (std::uint32_t s : nodes[n].sources) independent = independent && written_buffer(plan, m) != s && m != s;
            for (std::uint32_t s : nodes[m].sources) independent = independent && written_buffer(plan, n) != s;
        }
        if (!independent) close();
        members.push_back(n);
        plan.step[n] = step;
    }
    close();
}

}  // namespace plan_detail

// How node `id` runs, from its spec and its sources' dtypes.
inline PlannedNode plan_node(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t id) {
    PlannedNode p;
    const auto kind = static_cast<OpKind>(spec.kind);
    if (!spec.op.payload && kind == OpKind::Input) {
        p.role = PlannedNode::Role::Input;
    } else if (!spec.op.payload && kind == OpKind::Constant) {
        p.role = PlannedNode::Role::Constant;
    } else if (!spec.op.payload && kind == OpKind::Scatter) {
        p.role = PlannedNode::Role::Scatter;
        p.kernel = scatter_copy_kernel(spec, dtypes, id);
        p.scatter = scatter_kernel(spec, dtypes, id);
    } else if (const auto* write = spec.payload_as<WriteAtOp>()) {
        p.role = PlannedNode::Role::Update;
        p.kernel = scatter_copy_kernel(spec, dtypes, id);
        Kernel k = lowering_detail::elementwise_frame(spec, dtypes, id);
        k.body = write->body;
        k.count = write->count;
        k.store_at = write->position;
        k.store_count = product(spec.shape);
        p.update = std::move(k);
    } else if (auto custom = custom_kernel_for(spec, dtypes, id)) {
        p.role = PlannedNode::Role::Kernel;
        p.custom = std::move(custom);
    } else if (auto kernel = kernel_for(spec, dtypes, id)) {
        p.role = PlannedNode::Role::Kernel;
        p.kernel = std::move(kernel);
    } else if (spec.op.payload) {
        p.role = PlannedNode::Role::HostOp;
    } else {
        throw Error("cuda::plan", fmt::format("node {}: no CUDA kernel for op {}", id, symbol_name(spec.kind)));
    }
    return p;
}

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
        plan.nodes[id] = plan_node(node.spec, dtypes, id);
    }
    plan_detail::plan_in_place(nodes, plan);
    plan.batch = blas_batches(
        nodes, [&](std::uint32_t n) { return std::any_of(plan.carried.begin(), plan.carried.end(), [&](auto c) { return c.second == n; }); });
    plan_detail::assign_groups(nodes, plan);
    plan.last_step = plan.step;
    for (std::uint32_t id = 0; id < nodes.size(); ++id)
        for (std::uint32_t s : nodes[id].sources) plan.last_step[s] = std::max(plan.last_step[s], plan.step[id]);
    return plan;
}

// The source and entry of a node that runs as one launch (plan_detail::groupable).
inline std::pair<std::string, std::string_view> member_source(const PlannedNode& p) {
    if (p.custom) return {p.custom->source(), p.custom->entry()};
    if (p.update) return {kernel_source(*p.update), kElementwiseEntry};
    return {kernel_source(*p.kernel), kernel_entry(*p.kernel)};
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
        if (p.update) add(kernel_source(*p.update));
        if (p.custom) add(p.custom->source());
    }
    return out;
}

}  // namespace luminal::cuda

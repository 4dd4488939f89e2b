#pragma once
// cuda::HostEmulator: the CUDA backend's plan (the same rules, the same
// kernels, the same in-place cache writes) run on the host. Each generated
// kernel runs through the kernel IR interpreter and each host op through its
// reference semantics (cuBLASLt's Matmul is a Matmul). It models the Runtime
// concept, so every check written for a runtime (op fixtures, models against
// transformers, random candidates) checks what the CUDA kernels compute,
// without a GPU. It does not check what only a device shows: warp-level code,
// races, timing. The way it runs a kernel is a parameter: the IR interpreter
// here, and the tests also run the printed CUDA source on the host.
#include <optional>
#include <span>
#include <vector>

#include "luminal/cuda/cuda_rules.hpp"
#include "luminal/cuda/device_model.hpp"
#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/cuda/plan.hpp"
#include "luminal/runtime/host_buffer_io.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal::cuda {

// Runs each kernel through the kernel IR interpreter.
struct InterpretKernels {
    void prepare(const Plan&) {}
    void run(const Kernel& k, const KernelBuffers& buffers) { interpret(k, buffers); }
    void run(const ScatterKernel& k, const KernelBuffers& buffers) { interpret(k, buffers); }
};

// Executor: prepare(plan) when a program is loaded, then run(kernel, buffers)
// for each Kernel and ScatterKernel of an execution.
template <typename Executor>
class BasicHostEmulator {
public:
    using Rules = egraph::CudaRules;

    CostModel cost_model() const { return device_cost_model(); }

    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        std::vector<std::optional<HostBuffer>> kept(program.nodes.size());
        if (binding == InputBinding::Keep)
            for (std::uint32_t i = 0; i < program.nodes.size(); ++i)
                if (auto old = same_input(program.nodes[i].spec)) kept[i] = std::move(buffers_[*old]);
        plan_ = plan_program(program);
        nodes_ = program.nodes;
        buffers_ = std::move(kept);
        executor_.prepare(plan_);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id)
            if (plan_.nodes[id].role == PlannedNode::Role::Constant) {
                HostBuffer c(nodes_[id].spec.dtype, 1);
                c.store_double(0, nodes_[id].spec.op.value);
                buffers_[id] = std::move(c);
            }
    }

    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        const std::uint32_t index = input_index(nodes_, t.id());
        const NodeSpec& node = nodes_[index].spec;
        buffers_[index] = host_buffer_from_bytes(node.dtype, bytes.data(), byte_input_count(node, bytes.size(), index));
    }

    void execute(const DynMap& dims) {
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const NodeSpec& node = nodes_[id].spec;
            const PlannedNode& p = plan_.nodes[id];
            const std::int64_t n = numel_of(node.shape, dims, id);
            if (p.role == PlannedNode::Role::Input) {
                check(buffers_[id].has_value(), "cuda::HostEmulator::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, node.hlir);
                check(static_cast<std::int64_t>(buffers_[id]->size()) == n, "cuda::HostEmulator::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, node.hlir,
                      buffers_[id]->size(), to_string(node.shape), n);
                continue;
            }
            if (p.role == PlannedNode::Role::Constant) continue;
            if (p.aliases_source) continue;  // its source wrote the carried input's buffer
            run(id, p, n, dims);
            for (std::uint32_t source : nodes_[id].sources) release_if_dead(source, id);
        }
        for (auto [output, input] : plan_.carried)
            if (!plan_.nodes[output].aliases_source) buffers_[input] = buffers_[output];
    }

    // The modelled device seconds of one execution (host time would rank
    // candidates by how fast they interpret), so a search over it is deterministic.
    double time_execution(const DynMap& dims, std::size_t) const {
        double seconds = 0;
        for (const ProgramNode& n : nodes_) {
            std::vector<DType> inputs;
            for (std::uint32_t s : n.sources) inputs.push_back(nodes_[s].spec.dtype);
            seconds += node_seconds(n.spec, inputs, dims, cost_model());
        }
        return seconds;
    }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        return host_buffer_values<T>(buffer_of(output_index(nodes_, t.graph(), t.id())));
    }

    // Whether the carried `output` is its input's buffer, written in place by a Scatter.
    bool updates_in_place(const GraphTensor& output) const {
        return plan_.nodes[output_index(nodes_, output.graph(), output.id())].aliases_source;
    }
    const Plan& plan() const { return plan_; }

private:
    void run(std::uint32_t id, const PlannedNode& p, std::int64_t n, const DynMap& dims) {
        const ProgramNode& node = nodes_[id];
        std::vector<const HostBuffer*> inputs;
        for (std::uint32_t s : node.sources) inputs.push_back(&buffer_of(s));
        if (p.role == PlannedNode::Role::HostOp) {
            HostBuffer out(node.spec.dtype, static_cast<std::size_t>(n));
            std::vector<ReferenceInput> readers;
            for (std::size_t k = 0; k < inputs.size(); ++k) readers.emplace_back(*inputs[k], node.spec.views[k], dims, id);
            node.spec.op.payload->reference(ReferenceCall{readers, out, dims, id});
            buffers_[id] = std::move(out);
            return;
        }
        if (p.role == PlannedNode::Role::Scatter) {
            HostBuffer* target = nullptr;
            if (p.in_place_input) {
                target = &*buffers_[*p.in_place_input];
            } else {
                buffers_[id] = HostBuffer(node.spec.dtype, static_cast<std::size_t>(n));
                executor_.run(*p.kernel, KernelBuffers{std::span(inputs).first(1), *buffers_[id], dims});
                target = &*buffers_[id];
            }
            const HostBuffer* scatter_inputs[] = {inputs[1], inputs[2]};
            executor_.run(*p.scatter, KernelBuffers{scatter_inputs, *target, dims});
            return;
        }
        HostBuffer out(node.spec.dtype, static_cast<std::size_t>(n));
        executor_.run(*p.kernel, KernelBuffers{inputs, out, dims});
        buffers_[id] = std::move(out);
    }

    // A node's data: its own buffer, or for an in-place Scatter (and the Output aliasing it) the carried input's.
    const HostBuffer& buffer_of(std::uint32_t id) const {
        std::uint32_t at = id;
        if (plan_.nodes[at].aliases_source) at = nodes_[at].sources[0];
        if (plan_.nodes[at].in_place_input) at = *plan_.nodes[at].in_place_input;
        check(buffers_[at].has_value(), "get", "node {} has not been computed; call execute first", id);
        return *buffers_[at];
    }

    void release_if_dead(std::uint32_t source, std::uint32_t consumer) {
        const auto role = plan_.nodes[source].role;
        const auto kind = static_cast<OpKind>(nodes_[source].spec.kind);
        if (role == PlannedNode::Role::Input || role == PlannedNode::Role::Constant || kind == OpKind::Output) return;
        if (plan_.nodes[source].in_place_input) return;
        if (plan_.last_use[source] == consumer) buffers_[source].reset();
    }

    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        const std::uint32_t index = input_index(nodes_, t.id());
        check_input_length(nodes_[index].spec, values.size(), index);
        buffers_[index] = host_buffer_from_values(nodes_[index].spec.dtype, values);
    }

    std::optional<std::uint32_t> same_input(const NodeSpec& input) const {
        return bound_input_like(nodes_, input, [&](std::uint32_t i) { return buffers_[i].has_value(); });
    }

    Plan plan_;
    std::vector<ProgramNode> nodes_;
    std::vector<std::optional<HostBuffer>> buffers_;
    Executor executor_;
};

using HostEmulator = BasicHostEmulator<InterpretKernels>;

}  // namespace luminal::cuda

static_assert(luminal::Runtime<luminal::cuda::HostEmulator>);

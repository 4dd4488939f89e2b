#pragma once
// cuda::HostEmulator: the CUDA backend's plan (the same rules, the same
// kernels, the same in-place cache writes, the same specialized programs)
// run on the host. Each generated kernel runs through the kernel IR
// interpreter and each host op through its reference semantics (cuBLASLt's
// Matmul is a Matmul). It models the Runtime concept, so every check written
// for a runtime (op fixtures, models against transformers, random candidates)
// checks what the CUDA kernels compute, without a GPU. It does not check what
// only a device shows: warp-level code, races, timing. The way it runs a
// kernel is a parameter: the IR interpreter here, and the tests also run the
// printed CUDA source on the host.
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "luminal/cuda/cuda_rules.hpp"
#include "luminal/cuda/device_model.hpp"
#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/cuda/launch_groups.hpp"
#include "luminal/cuda/launch_work.hpp"
#include "luminal/runtime/available_memory.hpp"
#include "luminal/runtime/host_buffer_io.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal::cuda {

// Runs each kernel through the kernel IR interpreter: it needs no sources.
struct InterpretKernels {
    void run(const Kernel& k, const KernelBuffers& buffers) { interpret(k, buffers); }
    void run(const ScatterKernel& k, const KernelBuffers& buffers) { interpret(k, buffers); }
    void run(const CustomKernel& k, const KernelBuffers& buffers) { k.interpret(buffers); }
};

// Executor: prepare(sources) when a program is loaded (every source its
// plans print), if it has prepare, then run(kernel, buffers) for each Kernel
// and ScatterKernel of an execution.
template <typename Executor>
class BasicHostEmulator {
public:
    using Rules = egraph::CudaRules;
    static constexpr bool runs_specializations = true;

    BasicHostEmulator() = default;
    explicit BasicHostEmulator(DeviceSpec device) : device_(device) {}

    CostModel cost_model() const { return device_cost_model(device_); }

    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        std::map<NodeId, HostBuffer> kept;
        guards_ = program.guards;
        variants_.clear();
        for (const Program& s : program.specializations) add_variant(s);
        add_variant(program);
        if (binding == InputBinding::Keep)
            for (auto& [hlir, buffer] : inputs_)
                if (const ProgramNode* input = input_node(hlir); input && input->spec.dtype == buffer.dtype)
                    kept.emplace(hlir, std::move(buffer));
        inputs_ = std::move(kept);
        last_ = nullptr;
        // Printing a model's sources was a tenth of its plan's compile: only an executor that reads them gets them.
        if constexpr (requires(std::vector<std::string> s) { executor_.prepare(s); }) {
            std::vector<std::string> sources;
            for (const Variant& v : variants_)
                for (std::string& s : plan_sources(v.plan))
                    if (std::find(sources.begin(), sources.end(), s) == sources.end()) sources.push_back(std::move(s));
            executor_.prepare(sources);
        }
    }

    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        const NodeSpec& node = bound_input(t);
        inputs_[t.id()] = host_buffer_from_bytes(node.dtype, bytes.data(), byte_input_count(node, bytes.size(), t.id()));
    }

    void execute(const DynMap& dims) {
        guards_.check_against(dims);
        Variant& v = variant_for(dims);
        for (std::uint32_t id = 0; id < v.nodes.size(); ++id) {
            const NodeSpec& node = v.nodes[id].spec;
            const PlannedNode& p = v.plan.nodes[id];
            const std::int64_t n = numel_of(node.shape, dims, id);
            if (p.role == PlannedNode::Role::Input) {
                const auto it = inputs_.find(node.hlir);
                check(it != inputs_.end(), "cuda::HostEmulator::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, node.hlir);
                check(static_cast<std::int64_t>(it->second.size()) == n, "cuda::HostEmulator::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, node.hlir,
                      it->second.size(), to_string(node.shape), n);
                continue;
            }
            if (p.role == PlannedNode::Role::Constant || p.aliases_source) continue;
            run(v, id, p, n, dims);
            for (std::uint32_t source : v.nodes[id].sources) release_if_dead(v, source, id);
        }
        for (auto [output, input] : v.plan.carried)
            if (!v.plan.nodes[output].aliases_source) inputs_[v.nodes[input].spec.hlir] = buffer_of(v, output);
        last_ = &v;
    }

    // The modelled device seconds of one execution, replayed as a CUDA graph
    // (host time would rank candidates by how fast they interpret), so a
    // search over it is deterministic.
    double time_execution(const DynMap& dims, std::size_t) const {
        const Variant& v = variant_for(dims);
        const auto launches = plan_launches(v.plan, v.nodes, dims, device_.multiprocessors, [](auto, auto) { return true; });
        double seconds = 0;
        for (const auto& [work, estimate] : plan_costs(v.plan, v.nodes, launches, dims, device_)) seconds += estimate.seconds;
        return seconds;
    }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        check(last_ != nullptr, "get", "node {} has not been computed; call execute first", t.id());
        return host_buffer_values<T>(buffer_of(*last_, output_index(last_->nodes, t.graph(), t.id())));
    }

    // Whether the carried `output` is its input's buffer, written in place, in every program.
    bool updates_in_place(const GraphTensor& output) const {
        return std::all_of(variants_.begin(), variants_.end(), [&](const Variant& v) {
            return v.plan.nodes[output_index(v.nodes, output.graph(), output.id())].aliases_source;
        });
    }
    // The plan of the main program (and its nodes, in the order they run), or of the one that runs at `dims`.
    const Plan& plan() const { return variants_.back().plan; }
    const std::vector<ProgramNode>& nodes() const { return variants_.back().nodes; }
    const Plan& plan(const DynMap& dims) const { return variant_for(dims).plan; }
    const DeviceSpec& device() const { return device_; }
    // The plan is the device's: its buffers are bounded by the emulated device's memory, not by the host's.
    std::optional<AvailableMemory> available_memory() const {
        return AvailableMemory{device_.memory_bytes, "the emulated device's memory (cuda::DeviceSpec::memory_bytes)"};
    }

private:
    struct Variant {
        DynMap fixed;
        Plan plan;
        std::vector<ProgramNode> nodes;
        std::vector<std::optional<HostBuffer>> results;  // by node: constants, and results while live
    };

    void add_variant(const Program& unscheduled) {
        const Program program = schedule_for_groups(unscheduled);
        Variant v{program.fixed_dims, plan_program(program), program.nodes, {}};
        v.results.resize(v.nodes.size());
        for (std::uint32_t id = 0; id < v.nodes.size(); ++id)
            if (v.plan.nodes[id].role == PlannedNode::Role::Constant) {
                HostBuffer c(v.nodes[id].spec.dtype, 1);
                c.store_double(0, v.nodes[id].spec.op.value);
                v.results[id] = std::move(c);
            }
        variants_.push_back(std::move(v));
    }
    Variant& variant_for(const DynMap& dims) {
        return const_cast<Variant&>(static_cast<const BasicHostEmulator&>(*this).variant_for(dims));
    }
    const Variant& variant_for(const DynMap& dims) const {
        check(!variants_.empty(), "cuda::HostEmulator", "no program loaded");
        for (const Variant& v : variants_)
            if (v.fixed.agrees_with(dims)) return v;
        return variants_.back();
    }

    // The Input node of the main program standing for HLIR node `hlir`, if any.
    const ProgramNode* input_node(NodeId hlir) const {
        for (const ProgramNode& n : variants_.back().nodes)
            if (n.spec.kind == symbol_of(OpKind::Input) && n.spec.hlir == hlir) return &n;
        return nullptr;
    }
    const NodeSpec& bound_input(const GraphTensor& t) const {
        check(!variants_.empty(), "set_data", "no program loaded");
        return variants_.back().nodes[input_index(variants_.back().nodes, t.id())].spec;
    }

    void run(Variant& v, std::uint32_t id, const PlannedNode& p, std::int64_t n, const DynMap& dims) {
        const ProgramNode& node = v.nodes[id];
        std::vector<const HostBuffer*> inputs;
        for (std::uint32_t s : node.sources) inputs.push_back(&buffer_of(v, s));
        if (p.role == PlannedNode::Role::HostOp) {
            HostBuffer out(node.spec.dtype, static_cast<std::size_t>(n));
            std::vector<ReferenceInput> readers;
            for (std::size_t k = 0; k < inputs.size(); ++k) readers.emplace_back(*inputs[k], node.spec.views[k], dims, id);
            node.spec.op.payload->reference(ReferenceCall{readers, out, dims, id});
            v.results[id] = std::move(out);
            return;
        }
        if (p.role == PlannedNode::Role::Scatter || p.role == PlannedNode::Role::Update) {
            HostBuffer* target = nullptr;
            if (p.in_place_input) {
                target = &inputs_.at(v.nodes[*p.in_place_input].spec.hlir);
            } else {
                v.results[id] = HostBuffer(node.spec.dtype, static_cast<std::size_t>(n));
                executor_.run(*p.kernel, KernelBuffers{std::span(inputs).first(1), *v.results[id], dims});
                target = &*v.results[id];
            }
            if (p.update) {
                executor_.run(*p.update, KernelBuffers{inputs, *target, dims});
                return;
            }
            const HostBuffer* scatter_inputs[] = {inputs[1], inputs[2]};
            executor_.run(*p.scatter, KernelBuffers{scatter_inputs, *target, dims});
            return;
        }
        if (p.in_place_input) {
            executor_.run(*p.kernel, KernelBuffers{inputs, inputs_.at(v.nodes[*p.in_place_input].spec.hlir), dims});
            return;
        }
        HostBuffer out(node.spec.dtype, static_cast<std::size_t>(n));
        if (p.custom) executor_.run(*p.custom, KernelBuffers{inputs, out, dims});
        else executor_.run(*p.kernel, KernelBuffers{inputs, out, dims});
        v.results[id] = std::move(out);
    }

    // A node's data: an input's bound buffer, its own result, or for an in-place
    // Scatter (and the Output aliasing it) the carried input's buffer.
    const HostBuffer& buffer_of(const Variant& v, std::uint32_t id) const {
        std::uint32_t at = id;
        if (v.plan.nodes[at].aliases_source) at = v.nodes[at].sources[0];
        if (v.plan.nodes[at].in_place_input) at = *v.plan.nodes[at].in_place_input;
        if (v.plan.nodes[at].role == PlannedNode::Role::Input) {
            const auto it = inputs_.find(v.nodes[at].spec.hlir);
            check(it != inputs_.end(), "get", "input node {} has no data; call set_data", id);
            return it->second;
        }
        check(v.results[at].has_value(), "get", "node {} has not been computed; call execute first", id);
        return *v.results[at];
    }

    void release_if_dead(Variant& v, std::uint32_t source, std::uint32_t consumer) {
        const auto role = v.plan.nodes[source].role;
        const auto kind = static_cast<OpKind>(v.nodes[source].spec.kind);
        if (role == PlannedNode::Role::Input || role == PlannedNode::Role::Constant || kind == OpKind::Output) return;
        if (v.plan.nodes[source].in_place_input) return;
        if (v.plan.last_use[source] == consumer) v.results[source].reset();
    }

    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        const NodeSpec& node = bound_input(t);
        check_input_length(node, values.size(), t.id());
        inputs_[t.id()] = host_buffer_from_values(node.dtype, values);
    }

    DeviceSpec device_{};
    ShapeGuards guards_;
    std::vector<Variant> variants_;  // the specializations, then the main program
    std::map<NodeId, HostBuffer> inputs_;  // by HLIR id, shared by the variants
    const Variant* last_ = nullptr;  // the variant the last execution ran
    Executor executor_;
};

using HostEmulator = BasicHostEmulator<InterpretKernels>;

}  // namespace luminal::cuda

static_assert(luminal::Runtime<luminal::cuda::HostEmulator>);

#pragma once
// ReferenceRuntime: executes HLIR primitives one by one on the CPU, exactly as
// op.hpp defines them, for every dtype. It is the oracle other backends are
// tested against, so it favours clarity and checks over speed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "luminal/core/host_buffer.hpp"
#include "luminal/graph/backend_op.hpp"
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/graph/program.hpp"
#include "luminal/runtime/host_buffer_io.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal {

class ReferenceRuntime {
public:
    // The oracle runs the graph exactly as written: no rewrite rules.
    using Rules = egraph::RuleSet<>;

    // Nothing to tune: the defaults, so that extraction behaves as for any host runtime.
    CostModel cost_model() const { return {}; }

    // Backend ops run with their declared reference semantics too (an op
    // without them is an Error naming it), so any candidate program can be
    // checked against the unoptimised graph.
    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        std::vector<std::optional<HostBuffer>> kept(program.nodes.size());
        if (binding == InputBinding::Keep)
            for (std::uint32_t i = 0; i < program.nodes.size(); ++i)
                if (auto old = same_input(program.nodes[i].spec)) kept[i] = std::move(buffers_[*old]);
        guards_ = program.guards;
        nodes_ = program.nodes;
        carried_ = carried_indices(program);
        buffers_ = std::move(kept);
        last_use_.assign(nodes_.size(), 0);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id)
            for (std::uint32_t source : nodes_[id].sources) last_use_[source] = std::max(last_use_[source], id);
    }

    // Binds values to an Input tensor; they persist across execute() calls.
    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }

    // Binds raw little-endian elements of the input's own dtype.
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        std::uint32_t index = input_index(nodes_, t.id());
        const NodeSpec& node = nodes_[index].spec;
        std::size_t count = byte_input_count(node, bytes.size(), index);
        buffers_[index] = host_buffer_from_bytes(node.dtype, bytes.data(), count);
    }

    void execute(const DynMap& dims) {
        guards_.check_against(dims);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const NodeSpec& node = nodes_[id].spec;
            std::int64_t n = numel_of(node.shape, dims, id);
            if (node.kind == symbol_of(OpKind::Input)) {
                check(buffers_[id].has_value(), "ReferenceRuntime::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, node.hlir);
                check(static_cast<std::int64_t>(buffers_[id]->size()) == n, "ReferenceRuntime::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, node.hlir,
                      buffers_[id]->size(), to_string(node.shape), n);
                continue;
            }
            buffers_[id] = run(nodes_[id], id, n, dims);
            for (std::uint32_t source : nodes_[id].sources) release_if_dead(source, id);
        }
        for (auto [output, input] : carried_) buffers_[input] = buffers_[output];  // Graph::carry
    }

    double time_execution(const DynMap& dims, std::size_t reps) { return host_execution_seconds(*this, dims, reps); }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        return host_buffer_values<T>(output_buffer(t));
    }

private:
    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        std::uint32_t index = input_index(nodes_, t.id());
        const NodeSpec& node = nodes_[index].spec;
        check_input_length(node, values.size(), index);
        buffers_[index] = host_buffer_from_values(node.dtype, values);
    }

    const HostBuffer& output_buffer(const GraphTensor& t) const {
        std::uint32_t out = output_index(nodes_, t.graph(), t.id());
        check(buffers_[out].has_value(), "get", "output node {} has not been computed; call execute first",
              nodes_[out].spec.hlir);
        return *buffers_[out];
    }

    void release_if_dead(std::uint32_t source, std::uint32_t consumer) {
        auto kind = static_cast<OpKind>(nodes_[source].spec.kind);
        if (kind != OpKind::Input && kind != OpKind::Output && last_use_[source] == consumer) buffers_[source].reset();
    }

    // The index of the bound Input node in the current program that `input` stands for too.
    std::optional<std::uint32_t> same_input(const NodeSpec& input) const {
        return bound_input_like(nodes_, input, [&](std::uint32_t i) { return buffers_[i].has_value(); });
    }

    ReferenceInput reader(const ProgramNode& node, std::uint32_t id, std::size_t k, const DynMap& dims) const {
        return ReferenceInput(*buffers_[node.sources[k]], node.spec.views[k], dims, id);
    }

    HostBuffer run(const ProgramNode& node, std::uint32_t id, std::int64_t n, const DynMap& dims) const;

    std::vector<ProgramNode> nodes_;
    ShapeGuards guards_;
    std::vector<std::optional<HostBuffer>> buffers_;
    std::vector<std::uint32_t> last_use_;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> carried_;  // (Output, Input) program indices
};

}  // namespace luminal

#include "luminal/runtime/reference_kernels.hpp"

static_assert(luminal::Runtime<luminal::ReferenceRuntime>);

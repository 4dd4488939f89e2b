#pragma once
// ReferenceRuntime: executes HLIR primitives one by one on the CPU, exactly as
// op.hpp defines them, for every dtype. It is the oracle other backends are
// tested against, so it favours clarity and checks over speed.
#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/runtime/bound_view.hpp"
#include "luminal/runtime/host_buffer.hpp"

namespace luminal {

class ReferenceRuntime {
public:
    void load(const Graph& graph) {
        nodes_ = graph.nodes();
        outputs_ = graph.outputs();
        buffers_.assign(nodes_.size(), std::nullopt);
        last_use_.assign(nodes_.size(), 0);
        for (NodeId id = 0; id < nodes_.size(); ++id)
            for (auto& in : nodes_[id].inputs) last_use_[in.source] = std::max(last_use_[in.source], id);
    }

    // Binds values to an Input tensor; they persist across execute() calls.
    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }

    void execute(const DynMap& dims) {
        for (NodeId id = 0; id < nodes_.size(); ++id) {
            const Node& node = nodes_[id];
            std::int64_t n = numel(node.shape, dims, id);
            if (node.op.kind == OpKind::Input) {
                check(buffers_[id].has_value(), "ReferenceRuntime::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, id);
                check(static_cast<std::int64_t>(buffers_[id]->size()) == n, "ReferenceRuntime::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, id,
                      buffers_[id]->size(), to_string(node.shape), n);
                continue;
            }
            buffers_[id] = run(node, id, n, dims);
            for (auto& in : node.inputs) release_if_dead(in.source, id);
        }
    }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        const HostBuffer& b = output_buffer(t);
        std::vector<T> out(b.size());
        for (std::size_t i = 0; i < out.size(); ++i) {
            if constexpr (std::is_floating_point_v<T>) out[i] = static_cast<T>(b.as_double(i));
            else out[i] = static_cast<T>(b.as_int(i));
        }
        return out;
    }

private:
    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        check(t.id() < nodes_.size() && nodes_[t.id()].op.kind == OpKind::Input, "set_data",
              "node {} is not an input of the compiled graph", t.id());
        const Node& node = nodes_[t.id()];
        if (std::none_of(node.shape.begin(), node.shape.end(), [](auto& d) { return !d.dims().empty(); })) {
            std::int64_t n = numel(node.shape, {}, t.id());
            check(static_cast<std::int64_t>(values.size()) == n, "set_data",
                  "input '{}' has shape {} ({} elements) but {} values were given", node.op.label, to_string(node.shape),
                  n, values.size());
        }
        HostBuffer b(node.dtype, values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_floating_point_v<T>) b.store_double(i, static_cast<double>(values[i]));
            else b.store_int(i, static_cast<std::int64_t>(values[i]));
        }
        buffers_[t.id()] = std::move(b);
    }

    const HostBuffer& output_buffer(const GraphTensor& t) const {
        std::optional<NodeId> out;
        if (t.id() < nodes_.size() && nodes_[t.id()].op.kind == OpKind::Output) out = t.id();
        for (NodeId o : outputs_)
            if (!out && nodes_[o].inputs[0].source == t.id()) out = o;
        check(out.has_value(), "get", "node {} ({}) is not an output; call .output() on it before compile", t.id(),
              t.id() < nodes_.size() ? name_of(nodes_[t.id()].op.kind) : "unknown");
        check(buffers_[*out].has_value(), "get", "output node {} has not been computed; call execute first", *out);
        return *buffers_[*out];
    }

    static std::int64_t numel(const Shape& shape, const DynMap& dims, NodeId id) {
        std::int64_t n = 1;
        for (auto& d : shape) {
            for (char c : d.dims())
                check(dims.contains(c), "ReferenceRuntime::execute",
                      "dynamic dimension '{}' is not set (needed by node {}, shape {}); call set_dim", c, id, to_string(shape));
            n *= d.eval(dims);
        }
        return n;
    }

    void release_if_dead(NodeId source, NodeId consumer) {
        OpKind kind = nodes_[source].op.kind;
        if (kind != OpKind::Input && kind != OpKind::Output && last_use_[source] == consumer) buffers_[source].reset();
    }

    // Reads element `index` of an input through its view; padding reads 0.
    struct InputReader {
        const HostBuffer& buffer;
        BoundView view;
        NodeId node;
        std::int64_t position(std::int64_t index) const {
            std::int64_t p = view.locate(index);
            check(p < static_cast<std::int64_t>(buffer.size()), "ReferenceRuntime",
                  "node {} reads position {} of a {}-element buffer (invalid view)", node, p, buffer.size());
            return p;
        }
        double f(std::int64_t index) const {
            std::int64_t p = position(index);
            return p < 0 ? 0.0 : buffer.as_double(static_cast<std::size_t>(p));
        }
        std::int64_t i(std::int64_t index) const {
            std::int64_t p = position(index);
            return p < 0 ? 0 : buffer.as_int(static_cast<std::size_t>(p));
        }
        void copy_to(HostBuffer& out, std::size_t to, std::int64_t index) const {
            std::int64_t p = position(index);
            if (p < 0) out.store_int(to, 0);
            else out.copy_element(to, buffer, static_cast<std::size_t>(p));
        }
    };

    InputReader reader(const Node& node, NodeId id, std::size_t k, const DynMap& dims) const {
        const NodeInput& in = node.inputs[k];
        return InputReader{*buffers_[in.source], BoundView(in.view, dims), id};
    }

    HostBuffer run(const Node& node, NodeId id, std::int64_t n, const DynMap& dims) const;

    std::vector<Node> nodes_;
    std::vector<NodeId> outputs_;
    std::vector<std::optional<HostBuffer>> buffers_;
    std::vector<NodeId> last_use_;
};

}  // namespace luminal

#include "luminal/runtime/reference_kernels.hpp"

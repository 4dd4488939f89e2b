#pragma once
// Graph: the HLIR program a model records. Nodes are appended in creation
// order, which is a topological order because a node's inputs exist before it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/core/error.hpp"
#include "luminal/graph/op.hpp"
#include "luminal/shape/dyn_map.hpp"
#include "luminal/shape/shape_guards.hpp"
#include "luminal/shape/shape_tracker.hpp"

namespace luminal {

using NodeId = std::uint32_t;

struct NodeInput {
    NodeId source;
    ShapeTracker view;  // how this node reads the source's contiguous output
    friend bool operator==(const NodeInput&, const NodeInput&) = default;
};

struct Node {
    Op op;
    std::vector<NodeInput> inputs;
    Shape shape;  // of the (contiguous) output
    DType dtype;
};

class GraphTensor;
struct CompileOptions;  // egraph/compile_options.hpp

// State one execution hands to the next: after each execute(), the values of
// `output` (an Output node) become the data of `input` (an Input node).
struct CarriedState {
    NodeId output;
    NodeId input;
    friend bool operator==(const CarriedState&, const CarriedState&) = default;
};

class Graph {
public:
    Graph() = default;
    // Tensors hold a pointer to their graph, so a graph stays where it was made.
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    GraphTensor tensor(const Shape& shape, DType dtype = DType::F32);
    GraphTensor named_tensor(std::string name, const Shape& shape, DType dtype = DType::F32);
    GraphTensor constant(double value, DType dtype = DType::F32);
    // A tensor whose element i is `expr` evaluated at Expression::index() = i.
    GraphTensor iota(Expression expr, const Shape& shape, DType dtype = DType::I32);
    GraphTensor arange(Expression n, DType dtype = DType::I32);
    // Values start, start + step, ... below end (floats allowed), like torch.arange.
    GraphTensor arange_options(double start, double end, double step, DType dtype = DType::F32);

    void set_dim(char dim, std::int64_t size) { dyn_map_.set(dim, size); }
    const DynMap& dyn_map() const { return dyn_map_; }
    // Dimension ranges the graph's inputs declare and size equalities ops assumed
    // without a proof; the compiled program checks them at every execution.
    const ShapeGuards& guards() const { return guards_; }
    ShapeGuards& guards() { return guards_; }

    NodeId add_node(Op op, std::vector<NodeInput> inputs, Shape shape, DType dtype) {
        for (auto& in : inputs)
            check(in.source < nodes_.size(), "Graph::add_node", "input node {} does not exist", in.source);
        nodes_.push_back(Node{std::move(op), std::move(inputs), std::move(shape), dtype});
        return static_cast<NodeId>(nodes_.size() - 1);
    }
    const Node& node(NodeId id) const {
        check(id < nodes_.size(), "Graph::node", "node {} does not exist (graph has {})", id, nodes_.size());
        return nodes_[id];
    }
    const std::vector<Node>& nodes() const { return nodes_; }
    std::size_t size() const { return nodes_.size(); }
    const std::vector<NodeId>& outputs() const { return outputs_; }
    void mark_output(NodeId id) { outputs_.push_back(id); }

    // Declares that after every execution the values of `output` (marked
    // .output()) become the data of `input` for the next one (a KV cache):
    // same shape and dtype, and each input and output carried at most once.
    // Runtimes may then update the input in place (defined in graph_creation.hpp).
    void carry(const GraphTensor& output, const GraphTensor& input);
    const std::vector<CarriedState>& carried() const { return carried_; }
    // The Output node that publishes `id`, if any (`id` may itself be one).
    std::optional<NodeId> output_of(NodeId id) const {
        if (id < nodes_.size() && nodes_[id].op.kind == OpKind::Output) return id;
        for (NodeId out : outputs_)
            if (nodes_[out].inputs[0].source == id) return out;
        return std::nullopt;
    }

    std::string to_dot() const;

    // HLIR -> e-graph -> saturation with the runtime's rules -> search ->
    // program, loaded on `runtime`, which is returned ready for set_data and
    // execute (defined in egraph/compile.hpp).
    template <typename Runtime>
    Runtime compile(Runtime runtime) const;
    template <typename Runtime>
    Runtime compile(Runtime runtime, const CompileOptions& options) const;

private:
    std::vector<Node> nodes_;
    std::vector<NodeId> outputs_;
    std::vector<CarriedState> carried_;
    DynMap dyn_map_;
    ShapeGuards guards_;
};

inline std::string Graph::to_dot() const {
    std::string out = "digraph hlir {\n  node [shape=box, fontname=monospace];\n";
    for (NodeId i = 0; i < nodes_.size(); ++i) {
        const Node& n = nodes_[i];
        std::string label(n.op.name());
        if (n.op.kind == OpKind::Input) label += fmt::format(" {}", n.op.label);
        if (n.op.kind == OpKind::Constant) label += fmt::format(" {}", n.op.value);
        if (n.op.kind == OpKind::Iota) label += fmt::format(" {}", n.op.iota);
        if (is_reduce(n.op.kind)) label += fmt::format(" axis={}", n.op.axis);
        label += fmt::format("\\n{} {}", to_string(n.shape), name_of(n.dtype));
        out += fmt::format("  n{} [label=\"{}\"];\n", i, label);
        for (std::size_t k = 0; k < n.inputs.size(); ++k) {
            const ShapeTracker& v = n.inputs[k].view;
            std::string edge = v.is_contiguous() ? "" : v.to_string();
            for (auto pos = edge.find('"'); pos != std::string::npos; pos = edge.find('"')) edge.erase(pos, 1);
            if (!edge.empty()) edge.insert(0, ": ");
            out += fmt::format("  n{} -> n{} [label=\"{}{}\"];\n", n.inputs[k].source, i, k, edge);
        }
    }
    return out + "}\n";
}

}  // namespace luminal

#pragma once
// Program (LLIR): what a runtime loads. A list of nodes in execution order,
// each an HLIR primitive or a backend op, reading earlier nodes through views.
// A NodeSpec is everything about a node except where its inputs come from; the
// e-graph interns NodeSpecs as e-node attributes, so lowering a choice of
// e-nodes back to a Program is a walk that fills in the sources.
#include <bit>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "luminal/graph/graph.hpp"

namespace luminal {

inline constexpr OpSymbol symbol_of(OpKind k) { return static_cast<OpSymbol>(k); }
inline constexpr bool is_backend_op(OpSymbol symbol) { return symbol >= kFirstBackendSymbol; }

inline std::string symbol_name(OpSymbol symbol) {
    if (is_backend_op(symbol)) return std::string(backend_op_name(symbol));
    return std::string(name_of(static_cast<OpKind>(symbol)));
}

// What load() does with the inputs bound to the program loaded before: drop
// them, or keep each one the new program also has (the same HLIR Input, dtype
// and shape), as the search does between candidates of one graph.
enum class InputBinding { Drop, Keep };

inline constexpr NodeId kNoHlirNode = std::numeric_limits<NodeId>::max();

struct NodeSpec {
    OpSymbol kind;                   // op.symbol()
    Op op{OpKind::Add};              // attributes: axis, constant, iota, label, or a backend op's payload
    std::vector<ShapeTracker> views; // one per input
    Shape shape;                     // of the contiguous output
    DType dtype = DType::F32;
    NodeId hlir = kNoHlirNode;       // Input and Output: the HLIR node they stand for

    // A backend op node with payload `op` reading its inputs through `views`.
    template <BackendOpType T>
    static NodeSpec backend(T op, std::vector<ShapeTracker> views, Shape shape, DType dtype) {
        NodeSpec s;
        s.op = Op::custom(std::move(op));
        s.kind = s.op.symbol();
        s.views = std::move(views);
        s.shape = std::move(shape);
        s.dtype = dtype;
        return s;
    }
    template <BackendOpType T>
    const T* payload_as() const { return op.payload_as<T>(); }

    // The op and its attributes, as program.txt and the dumps' graphs show them.
    std::string describe() const;

    bool operator==(const NodeSpec& o) const {
        return kind == o.kind && op == o.op && views == o.views && shape == o.shape && dtype == o.dtype && hlir == o.hlir;
    }
    std::size_t hash() const {
        std::size_t h = kind * 0x9E3779B97F4A7C15ull ^ static_cast<std::size_t>(dtype) ^ (std::size_t{hlir} << 20);
        h = h * 31 + std::bit_cast<std::uint64_t>(op.value) + op.axis * 7 + op.iota.hash();
        if (op.payload) h = h * 0x100000001B3ull ^ op.payload->hash();
        for (auto& v : views) h = h * 1000003u ^ v.hash();
        for (auto& d : shape) h = h * 131u ^ d.hash();
        return h;
    }
};

struct ProgramNode {
    NodeSpec spec;
    std::vector<std::uint32_t> sources;  // program indices, one per spec.views entry
};

struct Program {
    std::vector<ProgramNode> nodes;  // in execution order
    std::vector<CarriedState> carried;  // by HLIR ids, as Graph::carried()
    // The program is for executions whose dims include these (empty: any).
    DynMap fixed_dims;
    // Programs of the same graph chosen for particular dims (a decode step:
    // s = 1), over the same inputs and outputs; a runtime that can hold
    // several runs, for each execution, the first whose fixed dims match.
    std::vector<Program> specializations;
    // What the graph assumed about its dims; runtimes check it at every execution.
    ShapeGuards guards;

    bool runs_at(const DynMap& dims) const { return fixed_dims.agrees_with(dims); }
    // The program to run at `dims`: a matching specialization, else this one.
    const Program& for_dims(const DynMap& dims) const {
        for (const Program& s : specializations)
            if (s.runs_at(dims)) return s;
        return *this;
    }

    // The program node standing for an HLIR Input or Output node, if any.
    std::optional<std::uint32_t> find_hlir(NodeId hlir, OpKind kind) const {
        for (std::uint32_t i = 0; i < nodes.size(); ++i)
            if (nodes[i].spec.hlir == hlir && nodes[i].spec.kind == symbol_of(kind)) return i;
        return std::nullopt;
    }
    std::string to_string() const;
};

// Shared by the runtimes' set_data / execute: the element count of a node's
// shape under `dims` (Error naming the dim if one is unset), the program node
// binding an HLIR Input, and the length check for statically shaped inputs.
inline std::int64_t numel_of(const Shape& shape, const DynMap& dims, std::uint32_t node) {
    std::int64_t n = 1;
    for (auto& d : shape) {
        try {
            n *= d.eval(dims);
        } catch (const Error&) {
            // Runtimes call this for every node of every execution, so the walk
            // that lists an expression's dimensions is only paid on failure.
            for (char c : d.dims())
                check(dims.contains(c), "execute",
                      "dynamic dimension '{}' is not set (needed by node {}, shape {}); call set_dim", c, node,
                      to_string(shape));
            throw;
        }
    }
    return n;
}

inline std::uint32_t input_index(const std::vector<ProgramNode>& nodes, NodeId hlir) {
    for (std::uint32_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].spec.kind == symbol_of(OpKind::Input) && nodes[i].spec.hlir == hlir) return i;
    throw Error("set_data", fmt::format("node {} is not an input of the compiled graph", hlir));
}

// The program node publishing `tensor` (an Output node, or a tensor some
// Output publishes); Error when it is not an output.
inline std::uint32_t output_index(const std::vector<ProgramNode>& nodes, const Graph& graph, NodeId tensor) {
    std::optional<NodeId> hlir = graph.output_of(tensor);
    for (std::uint32_t i = 0; i < nodes.size() && hlir; ++i)
        if (nodes[i].spec.kind == symbol_of(OpKind::Output) && nodes[i].spec.hlir == *hlir) return i;
    throw Error("get", fmt::format("node {} ({}) is not an output; call .output() on it before compile", tensor,
                                   name_of(graph.node(tensor).op.kind)));
}

// Program indices of the carried (Output, Input) pairs.
inline std::vector<std::pair<std::uint32_t, std::uint32_t>> carried_indices(const Program& program) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (const CarriedState& c : program.carried) {
        auto output = program.find_hlir(c.output, OpKind::Output);
        auto input = program.find_hlir(c.input, OpKind::Input);
        check(output && input, "load", "the program carries HLIR node {} into {}, but lacks {}", c.output, c.input,
              output ? "that input" : "that output");
        out.emplace_back(*output, *input);
    }
    return out;
}

inline void check_input_length(const NodeSpec& input, std::size_t values, std::uint32_t index) {
    bool static_shape = std::none_of(input.shape.begin(), input.shape.end(), [](auto& d) { return !d.dims().empty(); });
    if (!static_shape) return;  // checked at execute, once the dims are known
    std::int64_t n = numel_of(input.shape, {}, index);
    check(static_cast<std::int64_t>(values) == n, "set_data", "input '{}' has shape {} ({} elements) but {} values were given",
          input.op.label, to_string(input.shape), n, values);
}

// Element count of raw input bytes; they must be whole elements of the input's dtype.
inline std::size_t byte_input_count(const NodeSpec& input, std::size_t bytes, std::uint32_t index) {
    const std::size_t element = size_of(input.dtype);
    check(bytes % element == 0, "set_bytes", "input '{}' is {} ({} bytes per element) but {} bytes were given",
          input.op.label, name_of(input.dtype), element, bytes);
    check_input_length(input, bytes / element, index);
    return bytes / element;
}

// The HLIR graph as a program, node for node.
inline Program program_of(const Graph& graph) {
    Program p;
    for (NodeId id = 0; id < graph.size(); ++id) {
        const Node& n = graph.node(id);
        ProgramNode out;
        out.spec.kind = n.op.symbol();
        out.spec.op = n.op;
        out.spec.shape = n.shape;
        out.spec.dtype = n.dtype;
        if (n.op.kind == OpKind::Input || n.op.kind == OpKind::Output) out.spec.hlir = id;
        for (auto& in : n.inputs) {
            out.spec.views.push_back(in.view);
            out.sources.push_back(in.source);
        }
        p.nodes.push_back(std::move(out));
    }
    p.carried = graph.carried();
    return p;
}

inline std::string NodeSpec::describe() const {
    std::string out = symbol_name(kind);
    if (kind == symbol_of(OpKind::Input)) out += fmt::format(" {}", op.label);
    if (kind == symbol_of(OpKind::Constant)) out += fmt::format(" {}", op.value);
    if (kind == symbol_of(OpKind::Iota)) out += fmt::format(" {}", op.iota);
    if (kind == symbol_of(OpKind::SumReduce) || kind == symbol_of(OpKind::MaxReduce)) out += fmt::format(" axis={}", op.axis);
    if (op.payload) {
        std::string attributes = op.payload->attributes();
        if (!attributes.empty()) out += " " + attributes;
    }
    return out;
}

inline std::string Program::to_string() const {
    std::string out;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
        const NodeSpec& s = nodes[i].spec;
        out += fmt::format("%{} = {}(", i, s.describe());
        for (std::size_t k = 0; k < nodes[i].sources.size(); ++k) {
            out += fmt::format("{}%{}", k ? ", " : "", nodes[i].sources[k]);
            if (!s.views[k].is_contiguous()) out += fmt::format(" {}", s.views[k].to_string());
        }
        out += fmt::format(") : {} {}\n", luminal::to_string(s.shape), name_of(s.dtype));
    }
    for (auto [output, input] : carried_indices(*this)) out += fmt::format("carry %{} -> %{}\n", output, input);
    for (const Program& s : specializations) {
        std::string fixed;
        for (auto [c, v] : s.fixed_dims.entries()) fixed += fmt::format(" {}={}", c, v);
        out += fmt::format("\nspecialized for{}:\n{}", fixed, s.to_string());
    }
    return out;
}

}  // namespace luminal

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

// Backend ops share the symbol space of OpKind (primitives are below 64).
enum class BackendOp : std::uint16_t {
    Matmul = 64,            // inputs a [.., m, k], b [.., n, k] (b read transposed); out [.., m, n]
    FusedElementwise = 65,  // a FusedProgram over its inputs, one pass, no intermediates
};

inline constexpr std::uint16_t symbol_of(OpKind k) { return static_cast<std::uint16_t>(k); }
inline constexpr std::uint16_t symbol_of(BackendOp k) { return static_cast<std::uint16_t>(k); }
inline constexpr bool is_backend_op(std::uint16_t symbol) { return symbol >= 64; }

inline std::string symbol_name(std::uint16_t symbol) {
    if (symbol == symbol_of(BackendOp::Matmul)) return "Matmul";
    if (symbol == symbol_of(BackendOp::FusedElementwise)) return "FusedElementwise";
    return std::string(name_of(static_cast<OpKind>(symbol)));
}

// One step of a fused elementwise region. Operand slots below the region's
// input count name its inputs; slot input_count + j names step j's result.
struct FusedStep {
    OpKind kind;  // a unary or binary primitive, Cast, Constant or Iota
    std::uint16_t a = 0, b = 0;
    DType dtype = DType::F32;
    double value = 0;  // Constant
    Expression iota;   // Iota
    friend bool operator==(const FusedStep& x, const FusedStep& y) {  // constants by bit pattern, as in Op
        return x.kind == y.kind && x.a == y.a && x.b == y.b && x.dtype == y.dtype && x.iota == y.iota &&
               std::bit_cast<std::uint64_t>(x.value) == std::bit_cast<std::uint64_t>(y.value);
    }
};

struct FusedProgram {
    std::vector<FusedStep> steps;  // the last step is the region's result
    friend bool operator==(const FusedProgram&, const FusedProgram&) = default;
};

inline constexpr NodeId kNoHlirNode = std::numeric_limits<NodeId>::max();

struct NodeSpec {
    std::uint16_t kind;                          // symbol_of(OpKind) or symbol_of(BackendOp)
    Op op{OpKind::Add};                          // primitive attributes (axis, constant, iota, label)
    std::vector<ShapeTracker> views;             // one per input
    Shape shape;                                 // of the contiguous output
    DType dtype = DType::F32;
    std::shared_ptr<const FusedProgram> fused;   // FusedElementwise only
    NodeId hlir = kNoHlirNode;                   // Input and Output: the HLIR node they stand for

    bool operator==(const NodeSpec& o) const {
        bool same_fused = fused == o.fused || (fused && o.fused && *fused == *o.fused);
        return kind == o.kind && op == o.op && views == o.views && shape == o.shape && dtype == o.dtype &&
               same_fused && hlir == o.hlir;
    }
    std::size_t hash() const {
        std::size_t h = kind * 0x9E3779B97F4A7C15ull ^ static_cast<std::size_t>(dtype) ^ (std::size_t{hlir} << 20);
        h = h * 31 + std::bit_cast<std::uint64_t>(op.value) + op.axis * 7 + op.iota.hash();
        for (auto& v : views) h = h * 1000003u ^ v.hash();
        for (auto& d : shape) h = h * 131u ^ d.hash();
        if (fused) h ^= fused->steps.size() * 0x51ED27u;
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
        for (char c : d.dims())
            check(dims.contains(c), "execute", "dynamic dimension '{}' is not set (needed by node {}, shape {}); call set_dim",
                  c, node, to_string(shape));
        n *= d.eval(dims);
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
        out.spec.kind = symbol_of(n.op.kind);
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

inline std::string Program::to_string() const {
    std::string out;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
        const NodeSpec& s = nodes[i].spec;
        out += fmt::format("%{} = {}", i, symbol_name(s.kind));
        if (s.kind == symbol_of(OpKind::Input)) out += fmt::format(" {}", s.op.label);
        if (s.kind == symbol_of(OpKind::Constant)) out += fmt::format(" {}", s.op.value);
        if (s.kind == symbol_of(OpKind::Iota)) out += fmt::format(" {}", s.op.iota);
        if (s.kind == symbol_of(OpKind::SumReduce) || s.kind == symbol_of(OpKind::MaxReduce))
            out += fmt::format(" axis={}", s.op.axis);
        if (s.fused) out += fmt::format(" steps={}", s.fused->steps.size());
        out += "(";
        for (std::size_t k = 0; k < nodes[i].sources.size(); ++k) {
            out += fmt::format("{}%{}", k ? ", " : "", nodes[i].sources[k]);
            if (!s.views[k].is_contiguous()) out += fmt::format(" {}", s.views[k].to_string());
        }
        out += fmt::format(") : {} {}\n", luminal::to_string(s.shape), name_of(s.dtype));
    }
    for (auto [output, input] : carried_indices(*this)) out += fmt::format("carry %{} -> %{}\n", output, input);
    return out;
}

}  // namespace luminal

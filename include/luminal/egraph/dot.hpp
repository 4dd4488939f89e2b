#pragma once
// Graphviz views of an e-graph (one cluster per class) and of a program.
#include <string>

#include "luminal/egraph/hlir.hpp"

namespace luminal::egraph {

// A node's op, attributes, shape, dtype and the views other than contiguous, as a Graphviz label.
inline std::string label_of(const NodeSpec& s) {
    std::string text = fmt::format("{}\n{} {}", s.describe(), to_string(s.shape), name_of(s.dtype));
    for (std::size_t k = 0; k < s.views.size(); ++k)
        if (!s.views[k].is_contiguous()) text += fmt::format("\ninput {}: {}", k, s.views[k].to_string());
    std::string label;
    for (char ch : text) {
        if (ch == '"' || ch == '\\') label += '\\';
        label += ch == '\n' ? std::string("\\n") : std::string(1, ch);
    }
    return label;
}

inline std::string to_dot(const EGraph& g, const HlirContext& ctx) {
    std::string out = "digraph egraph {\n  compound=true;\n  node [shape=box, fontname=monospace];\n";
    std::vector<std::vector<ENodeId>> members(g.class_capacity());
    for (ENodeId n = 0; n < g.total_nodes(); ++n)
        if (g.alive(n)) members[g.class_of(n)].push_back(n);
    for (ClassId c = 0; c < members.size(); ++c) {
        if (members[c].empty()) continue;
        out += fmt::format("  subgraph cluster_{} {{\n    label=\"class {}\"; style=dotted;\n", c, c);
        for (ENodeId n : members[c]) out += fmt::format("    e{} [label=\"{}\"];\n", n, label_of(ctx.spec(g, n)));
        out += "  }\n";
    }
    for (ENodeId n = 0; n < g.total_nodes(); ++n) {
        if (!g.alive(n)) continue;
        auto kids = g.children(n);
        for (std::size_t i = 0; i < kids.size(); ++i) {
            ClassId k = g.find(kids[i]);
            out += fmt::format("  e{} -> e{} [lhead=cluster_{}, label=\"{}\"];\n", n, members[k].front(), k, i);
        }
    }
    return out + "}\n";
}

inline std::string to_dot(const Program& p) {
    std::string out = "digraph program {\n  node [shape=box, fontname=monospace];\n";
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
        out += fmt::format("  p{} [label=\"{}\"];\n", i, label_of(p.nodes[i].spec));
        for (std::uint32_t src : p.nodes[i].sources) out += fmt::format("  p{} -> p{};\n", src, i);
    }
    return out + "}\n";
}

}  // namespace luminal::egraph

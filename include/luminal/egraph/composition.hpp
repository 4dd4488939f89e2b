#pragma once
// Finds a high-level op's composition in the e-graph by recording it again.
// A rule that stands in for a composition (argsort's rank count, say) records
// that composition with the same op function a user calls, into a scratch
// Graph whose Input nodes stand for classes the rule has found, and asks
// whether the e-graph holds every node of it: each node's spec, over the
// classes found for its inputs, must be an e-node already (a hash-cons
// lookup, nothing is added). The pattern is then the op's own code, so it
// cannot drift from what the op records.
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "luminal/egraph/hlir.hpp"

namespace luminal::egraph {

// The class of node `root` of `pattern`, its Input nodes bound by `leaves` (an
// Input node of the pattern, the class it stands for), if the e-graph holds
// the composition. An Input without a binding, or any node the e-graph lacks,
// means it does not.
inline std::optional<ClassId> find_composition(const EGraph& g, HlirContext& ctx, const Graph& pattern, NodeId root,
                                               std::span<const std::pair<NodeId, ClassId>> leaves) {
    const Program program = program_of(pattern);
    std::vector<std::optional<ClassId>> classes(program.nodes.size());
    for (NodeId id = 0; id <= root; ++id) {
        const ProgramNode& node = program.nodes[id];
        if (node.spec.kind == symbol_of(OpKind::Input)) {
            for (const auto& [input, cls] : leaves)
                if (input == id) classes[id] = g.find(cls);
            continue;
        }
        std::vector<ClassId> children;
        bool known = true;
        for (std::uint32_t s : node.sources) {
            known = known && classes[s].has_value();
            if (known) children.push_back(*classes[s]);
        }
        if (!known) continue;
        if (const auto attr = ctx.specs.find(node.spec)) classes[id] = g.lookup(node.spec.kind, *attr, children);
    }
    return classes[root];
}

}  // namespace luminal::egraph

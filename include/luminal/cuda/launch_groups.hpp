#pragma once
// Several independent kernels as one launch (plan.hpp picks the groups):
// their sources become device functions of one module, and one entry hands
// each member its own range of blocks (it sees its own block index and grid
// size), so q, k and v projections, or the cache writes of a layer, cost one
// launch. schedule_for_groups() first orders a program by dependency depth,
// so kernels that could run together stand together, unless that would make
// more results live at once.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "luminal/cuda/attention_source.hpp"
#include "luminal/cuda/gemv_source.hpp"
#include "luminal/cuda/quant_blocks_source.hpp"
#include "luminal/cuda/sample_kernel.hpp"
#include "luminal/egraph/cost_model.hpp"
#include "luminal/graph/program.hpp"

namespace luminal::cuda {

inline constexpr std::string_view kGroupEntry = "luminal_group";

namespace group_detail {

// Bytes of kernel results live at once, at most, when `nodes` run in `order`.
inline double peak_bytes(const Program& program, const std::vector<std::uint32_t>& order, const DynMap& dims) {
    const auto& nodes = program.nodes;
    std::vector<std::uint32_t> position(nodes.size()), last(nodes.size(), 0);
    for (std::uint32_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    for (std::uint32_t n = 0; n < nodes.size(); ++n)
        for (std::uint32_t s : nodes[n].sources) last[s] = std::max(last[s], position[n]);
    std::vector<double> delta(order.size() + 1, 0);
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
        const auto kind = nodes[n].spec.kind;
        if (kind == symbol_of(OpKind::Input) || kind == symbol_of(OpKind::Constant)) continue;
        double bytes = static_cast<double>(size_of(nodes[n].spec.dtype));
        for (const Expression& d : nodes[n].spec.shape) bytes *= static_cast<double>(std::max<std::int64_t>(d.eval(dims), 0));
        delta[position[n]] += bytes;
        delta[std::max(last[n], position[n]) + 1] -= bytes;
    }
    double live = 0, peak = 0;
    for (double d : delta) peak = std::max(peak, live += d);
    return peak;
}

// The parameters of a generated kernel's entry, as printed.
inline std::vector<std::string> parameters(const std::string& source, std::string_view entry) {
    const std::string opening = "void " + std::string(entry) + "(";
    const std::size_t open = source.find(opening) + opening.size(), close = source.find(')', open);
    std::vector<std::string> out;
    for (std::size_t at = open; at < close;) {
        const std::size_t end = std::min(source.find(',', at), close);
        std::string p = source.substr(at, end - at);
        p.erase(0, p.find_first_not_of(' '));
        out.push_back(p);
        at = end + 1;
    }
    return out;
}

inline std::string name_of_parameter(const std::string& p) { return p.substr(p.find_last_of(" *") + 1); }

inline void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
}

}  // namespace group_detail

// For each node, the nodes it must follow besides its sources: a carried
// input's update (the node its Output carries back, reading the input) follows
// the input's other readers, so it may write the input's buffer in place
// (plan.hpp), unless one of them reads the update's result.
inline std::vector<std::vector<std::uint32_t>> updates_after_readers(const Program& program) {
    const auto& nodes = program.nodes;
    std::vector<std::vector<std::uint32_t>> after(nodes.size());
    for (auto [output, input] : carried_indices(program)) {
        const std::uint32_t update = nodes[output].sources[0];
        const auto& read = nodes[update].sources;
        if (std::find(read.begin(), read.end(), input) == read.end()) continue;
        std::vector<bool> downstream(nodes.size(), false);
        downstream[update] = true;
        std::vector<std::uint32_t> readers;
        for (std::uint32_t n = update + 1; n < nodes.size(); ++n)
            for (std::uint32_t s : nodes[n].sources) downstream[n] = downstream[n] || downstream[s];
        for (std::uint32_t n = 0; n < nodes.size(); ++n) {
            const auto& sources = nodes[n].sources;
            if (n == update || std::find(sources.begin(), sources.end(), input) == sources.end()) continue;
            if (downstream[n]) {
                readers.clear();
                break;
            }
            readers.push_back(n);
        }
        after[update].insert(after[update].end(), readers.begin(), readers.end());
    }
    return after;
}

// `program` ordered by dependency depth (each node as early as its sources
// and updates_after_readers allow, ties in program order), or unchanged when
// that raises the memory peak.
inline Program schedule_for_groups(const Program& program) {
    const auto& nodes = program.nodes;
    const std::vector<std::vector<std::uint32_t>> after = updates_after_readers(program);
    std::vector<std::uint32_t> depth(nodes.size(), 0), order(nodes.size()), original(nodes.size());
    for (std::uint32_t n = 0; n < nodes.size(); ++n) order[n] = original[n] = n;
    // Sources come first in program order, the nodes an update follows need not: passes until depths settle.
    // Depths that still change after as many passes as there are nodes come from updates that would each
    // follow the other: the program keeps its order.
    bool changed = true;
    for (std::size_t pass = 0; changed && pass <= nodes.size(); ++pass) {
        changed = false;
        for (std::uint32_t n = 0; n < nodes.size(); ++n) {
            std::uint32_t d = 0;
            for (std::uint32_t s : nodes[n].sources) d = std::max(d, depth[s] + 1);
            for (std::uint32_t s : after[n]) d = std::max(d, depth[s] + 1);
            changed = changed || d != depth[n];
            depth[n] = d;
        }
    }
    if (changed) return program;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return depth[a] < depth[b]; });
    DynMap dims = costing_dims(program.fixed_dims);
    if (order == original || group_detail::peak_bytes(program, order, dims) > 1.25 * group_detail::peak_bytes(program, original, dims) + 1e6)
        return program;
    Program out;
    out.carried = program.carried;
    out.fixed_dims = program.fixed_dims;
    out.specializations = program.specializations;
    std::vector<std::uint32_t> renamed(nodes.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) renamed[order[i]] = i;
    for (std::uint32_t n : order) {
        ProgramNode node = nodes[n];
        for (std::uint32_t& s : node.sources) s = renamed[s];
        out.nodes.push_back(std::move(node));
    }
    return out;
}

// The module of a launch group: each member's kernel as a device function
// taking its block index and grid size, and one entry taking every member's
// parameters and grid size, in order.
inline std::string group_source(const std::vector<std::pair<std::string, std::string_view>>& members) {
    using namespace group_detail;
    std::string preludes = std::string(kKernelPrelude), functions, parameters_text, dispatch;
    // Every member declares 256-thread blocks: so does the group, asking for the fewest blocks per SM any member
    // asks for (a member that needs registers for its loads in flight keeps them).
    int min_blocks = std::numeric_limits<int>::max();
    for (std::string_view prelude : {kGemvPrelude, kQuantPrelude, kAttentionPrelude, kSamplePrelude})
        if (std::any_of(members.begin(), members.end(), [&](const auto& m) { return m.first.find(prelude) != std::string::npos; }))
            preludes += std::string(prelude);
    for (std::size_t i = 0; i < members.size(); ++i) {
        const auto& [source, entry] = members[i];
        std::string text = source;
        for (std::string_view prelude : {kKernelPrelude, kGemvPrelude, kQuantPrelude, kAttentionPrelude, kSamplePrelude})
            if (auto at = text.find(prelude); at != std::string::npos) text.erase(at, prelude.size());
        min_blocks = std::min(min_blocks, source_detail::erase_block_bound(text, entry));
        const std::vector<std::string> params = parameters(source, entry);
        replace_all(text, fmt::format("extern \"C\" __global__ void {}(", entry),
                    fmt::format("__device__ __forceinline__ void luminal_member{}(const unsigned luminal_block, const unsigned luminal_grid, ", i));
        replace_all(text, "blockIdx.x", "luminal_block");
        replace_all(text, "gridDim.x", "luminal_grid");
        functions += text;
        std::vector<std::string> args;
        for (const std::string& p : params) {
            parameters_text += (parameters_text.empty() ? "" : ", ") + p + fmt::format("_{}", i);
            args.push_back(name_of_parameter(p) + fmt::format("_{}", i));
        }
        parameters_text += fmt::format(", const unsigned grid_{}", i);
        dispatch += fmt::format("  if (block < grid_{0}) {{ luminal_member{0}(block, grid_{0}, {1}); return; }}\n  block -= grid_{0};\n", i,
                                fmt::join(args, ", "));
    }
    const std::string declared = fmt::format("extern \"C\" __global__ void {}({})", kGroupEntry, parameters_text);
    return preludes + functions + (min_blocks > 0 ? source_detail::block_bound_declaration(declared, min_blocks) : std::string()) + declared +
           fmt::format(" {{\n  unsigned block = blockIdx.x;\n{}}}\n", dispatch);
}

// The module of every launch group of a plan.
inline std::vector<std::string> group_sources(const Plan& plan) {
    std::vector<std::vector<std::pair<std::string, std::string_view>>> groups;
    for (std::uint32_t id = 0; id < plan.nodes.size(); ++id)
        if (const std::uint32_t g = plan.group[id]; g != kNoGroup) {
            if (groups.size() <= g) groups.resize(g + 1);
            groups[g].push_back(member_source(plan.nodes[id]));
        }
    std::vector<std::string> out;
    for (const auto& members : groups) out.push_back(group_source(members));
    return out;
}

}  // namespace luminal::cuda

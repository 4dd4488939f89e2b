#pragma once
// The cost model the extractor prices e-nodes with: estimated seconds from
// three numbers each runtime states for its hardware (Runtime::cost_model()),
// and from what a node moves and computes at representative sizes.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "luminal/graph/program.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal {

// What the cost model knows of a node it prices: its spec, and for each input
// the dtype, the shape and whether it is bound data (an Input or Constant).
struct NodeCostQuery {
    const NodeSpec& spec;
    std::span<const DType> input_dtypes;
    std::span<const Shape> input_shapes;        // empty when not known
    std::span<const std::uint8_t> input_bound;  // empty when not known
    const DynMap& dims;
};

struct CostModel {
    double bytes_per_second = 1e10;   // memory bandwidth a kernel streams at
    double launch_seconds = 4e-7;     // fixed cost of running one more kernel
    double flops_per_second = 1.6e11; // arithmetic rate of a backend op's flops()
    // A runtime's own pricing of a node (its launches, their parallelism) at
    // several dims at once, seconds[i] at dims[i] (the query's dims unused):
    // what the node alone decides (its kernel) is derived once for all of
    // them. When unset, node_seconds' estimate from the three numbers above.
    std::function<void(const NodeCostQuery&, std::span<const DynMap> dims, std::span<double> seconds)> price = {};
};

// Sizes a compilation is priced and profiled at, and how often each runs.
struct Workload {
    DynMap dims;
    double weight = 1;
};

// Dims for costing: those set, else a typical size.
inline DynMap costing_dims(const DynMap& known, std::int64_t fallback = 256) {
    DynMap out;
    for (char c = 'a'; c <= 'z'; ++c) out.set(c, known.get(c).value_or(fallback));
    for (char c = 'A'; c <= 'Z'; ++c) out.set(c, known.get(c).value_or(fallback));
    return out;
}

// The workloads a compilation uses: the given ones, else the graph's dims.
// Unset dims are costed at a typical size either way.
inline std::vector<Workload> costing_workloads(const std::vector<Workload>& given, const DynMap& graph_dims) {
    std::vector<Workload> out;
    if (given.empty()) out.push_back({costing_dims(graph_dims), 1});
    for (const Workload& w : given) {
        DynMap dims = graph_dims;
        for (char c = 'a'; c <= 'z'; ++c)
            if (auto v = w.dims.get(c)) dims.set(c, *v);
        for (char c = 'A'; c <= 'Z'; ++c)
            if (auto v = w.dims.get(c)) dims.set(c, *v);
        out.push_back({costing_dims(dims), w.weight});
    }
    return out;
}

// Seconds one execution of node `s` takes under `model`: the runtime's own
// price, else its output and its inputs (of the given dtypes) streamed once,
// one launch, and the arithmetic a backend op declares or an elementwise primitive does.
inline double node_seconds(const NodeCostQuery& q, const CostModel& model) {
    if (model.price) {
        double seconds = 0;
        model.price(q, std::span(&q.dims, 1), std::span(&seconds, 1));
        return seconds;
    }
    const NodeSpec& s = q.spec;
    if (s.kind == symbol_of(OpKind::Input) || s.kind == symbol_of(OpKind::Constant)) return 1 / model.bytes_per_second;
    auto elements = [&](const Shape& shape) {
        double n = 1;
        for (auto& d : shape) n *= static_cast<double>(std::max<std::int64_t>(d.eval(q.dims), 0));
        return n;
    };
    double bytes = elements(s.shape) * static_cast<double>(size_of(s.dtype));
    for (std::size_t k = 0; k < s.views.size(); ++k)
        bytes += elements(s.views[k].dims()) * static_cast<double>(size_of(k < q.input_dtypes.size() ? q.input_dtypes[k] : s.dtype));
    double seconds = model.launch_seconds + bytes / model.bytes_per_second;
    if (s.op.payload) seconds += s.op.payload->flops(OpCostQuery{s.views, s.shape, s.dtype, q.dims}) / model.flops_per_second;
    else if (is_unary(s.op.kind) || is_binary(s.op.kind))
        seconds += elements(s.shape) * elementwise_flops(s.op.kind) / model.flops_per_second;
    return seconds;
}

inline double node_seconds(const NodeSpec& s, std::span<const DType> input_dtypes, const DynMap& dims, const CostModel& model) {
    return node_seconds(NodeCostQuery{s, input_dtypes, {}, {}, dims}, model);
}

}  // namespace luminal

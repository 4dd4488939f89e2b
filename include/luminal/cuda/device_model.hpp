#pragma once
// How extraction prices a CUDA program: each e-node as the launches the plan
// would make for it (planned as plan_program plans a node), each launch
// priced by estimate_launch on the DeviceSpec inside a replayed CUDA graph.
// The device runtime and its host emulator share it, so both extract the same
// program for a graph, and the plan report prices launches the same way.
#include <algorithm>
#include <limits>
#include <span>
#include <vector>

#include "luminal/cuda/launch_work.hpp"
#include "luminal/egraph/cost_model.hpp"

namespace luminal::cuda {

// A node no CUDA launch can compute is priced out of every choice that has another way.
inline constexpr double kUnplannable = 1e3;

// The node's seconds at each of `dims`, its kernel planned once for all of them.
inline void node_prices(const NodeCostQuery& q, std::span<const DynMap> dims, std::span<double> seconds, const DeviceSpec& device) {
    std::fill(seconds.begin(), seconds.end(), 0.0);
    const auto kind = q.spec.kind;
    if (kind == symbol_of(OpKind::Input) || kind == symbol_of(OpKind::Constant)) return;
    PlannedNode p;
    try {
        p = plan_node(q.spec, q.input_dtypes, 0);
    } catch (const Error&) {
        std::fill(seconds.begin(), seconds.end(), kUnplannable);
        return;
    }
    // A cache write into a bound (carried) buffer runs in place: no copy of the cache.
    if ((p.role == PlannedNode::Role::Scatter || p.role == PlannedNode::Role::Update) && !q.input_bound.empty() && q.input_bound[0])
        p.kernel.reset();
    std::vector<PlannedLaunch> launches;
    std::vector<SourceInfo> sources;
    for (std::size_t d = 0; d < dims.size(); ++d) {
        launches.clear();
        append_node_launches(launches, p, q.spec, q.input_dtypes, 0, dims[d], dims[d], device.multiprocessors);
        sources.clear();
        for (std::size_t i = 0; i < q.input_dtypes.size(); ++i) {
            double elements = 1;
            if (i < q.input_shapes.size())
                for (const Expression& e : q.input_shapes[i]) elements *= static_cast<double>(std::max<std::int64_t>(e.eval(dims[d]), 0));
            else elements = work_detail::view_elements(q.spec.views[i], dims[d]);
            sources.push_back({q.input_dtypes[i], elements, i < q.input_bound.size() && q.input_bound[i] != 0});
        }
        for (const PlannedLaunch& l : launches)
            seconds[d] += estimate_launch(launch_work(l, p, q.spec, sources, dims[d], device), device, true).seconds;
    }
}

inline CostModel device_cost_model(const DeviceSpec& device = {}) {
    CostModel model{device.bandwidth, device.graph_launch_seconds, device.flops};
    model.price = [device](const NodeCostQuery& q, std::span<const DynMap> dims, std::span<double> seconds) {
        node_prices(q, dims, seconds, device);
    };
    return model;
}

}  // namespace luminal::cuda

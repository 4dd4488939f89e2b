#pragma once
// How extraction prices a CUDA program: each e-node as the launches the plan
// would make for it (planned as plan_program plans a node), each launch
// priced by estimate_launch on the DeviceSpec inside a replayed CUDA graph.
// The device runtime and its host emulator share it, so both extract the same
// program for a graph, and the plan report prices launches the same way.
#include <limits>
#include <memory>
#include <vector>

#include "luminal/cuda/launch_work.hpp"
#include "luminal/egraph/cost_model.hpp"

namespace luminal::cuda {

// A node no CUDA launch can compute is priced out of every choice that has another way.
inline constexpr double kUnplannable = 1e3;

// What pricing a node at any dims needs of it, planned once: its kernel, as plan_program would plan it.
inline NodePricer node_pricer(const NodeCostQuery& q, const DeviceSpec& device) {
    const auto kind = q.spec.kind;
    if (kind == symbol_of(OpKind::Input) || kind == symbol_of(OpKind::Constant)) return [](const DynMap&) { return 0.0; };
    auto p = std::make_shared<PlannedNode>();
    try {
        *p = plan_node(q.spec, q.input_dtypes, 0);
    } catch (const Error&) {
        return [](const DynMap&) { return kUnplannable; };
    }
    // A cache write into a bound (carried) buffer runs in place: no copy of the cache.
    if ((p->role == PlannedNode::Role::Scatter || p->role == PlannedNode::Role::Update) && !q.input_bound.empty() && q.input_bound[0])
        p->kernel.reset();
    return [p = std::shared_ptr<const PlannedNode>(std::move(p)), &spec = q.spec, dtypes = q.input_dtypes, shapes = q.input_shapes,
            bound = q.input_bound, device](const DynMap& dims) {
        std::vector<PlannedLaunch> launches;
        append_node_launches(launches, *p, spec, dtypes, 0, dims, dims, device.multiprocessors);
        std::vector<SourceInfo> sources;
        for (std::size_t i = 0; i < dtypes.size(); ++i) {
            double elements = 1;
            if (i < shapes.size())
                for (const Expression& d : shapes[i]) elements *= static_cast<double>(std::max<std::int64_t>(d.eval(dims), 0));
            else elements = work_detail::view_elements(spec.views[i], dims);
            sources.push_back({dtypes[i], elements, i < bound.size() && bound[i] != 0});
        }
        double seconds = 0;
        for (const PlannedLaunch& l : launches)
            seconds += estimate_launch(launch_work(l, *p, spec, sources, dims, device), device, true).seconds;
        return seconds;
    };
}

inline CostModel device_cost_model(const DeviceSpec& device = {}) {
    CostModel model{device.bandwidth, device.graph_launch_seconds, device.flops};
    model.pricer = [device](const NodeCostQuery& q) { return node_pricer(q, device); };
    return model;
}

}  // namespace luminal::cuda

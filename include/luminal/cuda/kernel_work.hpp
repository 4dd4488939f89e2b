#pragma once
// What a kernel moves and computes, for the cost model and the plan report:
// the unique bytes it reads from each buffer (a view that broadcasts reads its
// elements once; a buffer is never read for more than its size), the bytes it
// writes, its arithmetic, and how many bytes each thread has in flight before
// it waits on one. Bound data (weights, caches) and results too large for L2
// come from DRAM; a small result another launch of the step just wrote is
// read from L2.
#include <algorithm>
#include <span>
#include <vector>

#include "luminal/cuda/device_spec.hpp"
#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/cuda/launch_cost.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal::cuda {

// What a launch knows of one buffer it reads.
struct SourceInfo {
    DType dtype = DType::F32;
    double elements = 0;
    bool bound = false;  // an Input or Constant: bound data, in DRAM
};

namespace work_detail {

// Distinct elements a view reads at `dims`: the sizes of its moving axes, within their valid windows.
inline double view_elements(const ShapeTracker& v, const DynMap& dims) {
    double n = 1;
    for (const auto& a : v.axes()) {
        if (a.stride.eval(dims) == 0) continue;
        const std::int64_t size = a.size.eval(dims);
        const std::int64_t lo = std::max(a.valid_lo.eval(dims), a.offset.eval(dims));
        const std::int64_t hi = std::min(a.valid_hi.eval(dims), a.offset.eval(dims) + size);
        n *= static_cast<double>(std::max<std::int64_t>(std::min(size, hi - lo), 0));
    }
    return n;
}

// Reads and arithmetic of bodies, accumulated per kernel input.
struct BodyTally {
    std::vector<double> elements;   // per kernel input
    std::vector<double> in_flight;  // per kernel input: bytes one evaluation's loads have in flight
    double steps = 0;               // arithmetic steps per evaluation
};

inline void tally(const Body& body, double gathers, const DynMap& dims, bool vector, BodyTally& t) {
    std::vector<double> in_flight(t.in_flight.size(), 0);
    for (const Step& s : body.steps) {
        if (s.kind != StepKind::Load) {
            t.steps += s.kind == StepKind::Unary || s.kind == StepKind::Binary ? 1 : 0;
            continue;
        }
        if (t.elements.size() <= s.input) t.elements.resize(s.input + 1, 0), t.in_flight.resize(s.input + 1, 0);
        if (in_flight.size() <= s.input) in_flight.resize(s.input + 1, 0);
        t.elements[s.input] += s.at == kAtElement ? view_elements(s.view, dims) : gathers;
        const bool contiguous = vector && s.view.rank() > 0 && s.view.axes().back().stride == Expression(1);
        in_flight[s.input] += contiguous ? 16.0 : static_cast<double>(size_of(s.dtype));
    }
    for (std::size_t i = 0; i < in_flight.size(); ++i) t.in_flight[i] = std::max(t.in_flight[i], in_flight[i]);
}

}  // namespace work_detail

// Whether reads of `source` come from L2: a small result of the step, not bound data.
inline bool from_l2(const SourceInfo& source, const DeviceSpec& device) {
    return !source.bound && source.elements * static_cast<double>(size_of(source.dtype)) <= static_cast<double>(device.l2_resident_bytes);
}
// Adds `elements` of `source` read once each (at most its size) to the launch.
inline void add_read(LaunchWork& w, const SourceInfo& source, double elements, const DeviceSpec& device) {
    const double bytes = std::min(elements, source.elements) * static_cast<double>(size_of(source.dtype));
    (from_l2(source, device) ? w.l2_read : w.dram_read) += bytes;
}
inline void add_write(LaunchWork& w, double bytes, const DeviceSpec& device) {
    (bytes <= static_cast<double>(device.l2_resident_bytes) ? w.l2_write : w.dram_write) += bytes;
}

// The work of a generated kernel whose inputs are `sources`.
inline LaunchWork kernel_work(const Kernel& k, bool vector, std::span<const SourceInfo> sources, const DynMap& dims,
                              const DeviceSpec& device) {
    using namespace work_detail;
    LaunchWork w;
    const double count = static_cast<double>(std::max<std::int64_t>(k.count.eval(dims), 0));
    const double extent = static_cast<double>(std::max<std::int64_t>(k.extent.eval(dims), 0));
    BodyTally t;
    tally(k.body, count, dims, vector, t);
    if (k.shape == Kernel::Shape::Elementwise)
        for (double& in : t.in_flight) in *= kElementwiseUnroll;
    for (const RowStageKernel& s : k.stages) tally(s.body, count, dims, false, t);
    w.dram_in_flight = w.l2_in_flight = 0;
    for (std::size_t i = 0; i < t.elements.size() && i < sources.size(); ++i) {
        add_read(w, sources[i], t.elements[i], device);
        (from_l2(sources[i], device) ? w.l2_in_flight : w.dram_in_flight) += t.in_flight[i];
    }
    add_write(w, count * static_cast<double>(size_of(k.out)), device);
    double evaluations = count;
    if (k.shape == Kernel::Shape::Reduce) evaluations = count * extent;
    if (k.shape == Kernel::Shape::Row) evaluations = count * (1 + static_cast<double>(k.stages.size()));
    // Each load is an instruction too, so of equal programs the one that folds a constant into a step is cheaper.
    double loads = 0;
    for (double in : t.in_flight) loads += in > 0 ? 1 : 0;
    w.flops = evaluations * std::max(t.steps + loads, 1.0);
    return w;
}

}  // namespace luminal::cuda

#pragma once
// The plan of one execution, read without a GPU: every launch the CUDA runtime
// would enqueue at given dims (kernel, op, grid, block, registers where NVRTC
// compiled it, unique bytes read and written, flops, modelled time), and the
// totals against the floor: the bytes a step must read at least (its weights
// once, the KV cache it attends to), over the stated bandwidth. Where the SASS
// can be read (sass_facts.hpp), each kernel is priced by what ptxas produced:
// its registers, and the bytes its main loop keeps in flight before the first
// load is waited on, and the instructions of one trip of that loop (column
// "loop", where the kernel knows the loop's trips and so its issue time); each
// row shows those facts and which term bounds its time.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "luminal/cuda/cubin_registers.hpp"
#include "luminal/cuda/launch_groups.hpp"
#include "luminal/cuda/launch_work.hpp"
#include "luminal/cuda/nvrtc.hpp"
#include "luminal/cuda/sass_facts.hpp"
#include "luminal/io/json.hpp"

namespace luminal::cuda {

struct PlanReportOptions {
    DeviceSpec device;
    std::int64_t layers = 0;       // for launches per layer; 0 when the program is no layered model
    double floor_bytes = 0;        // the least a step must read (0: not known)
    double floor_flops = 0;        // the least a step must compute (0: not known), priced at tensor-core rate
    double host_device_bytes = 0;  // what crosses between host and device per step
    bool registers = true;         // compile each kernel with NVRTC (cached) to read its register count
};

struct PlanReportRow {
    PlannedLaunch launch;
    std::string kernel, op;
    std::optional<int> registers;
    std::optional<SassFacts> facts;
    LaunchWork work;
    LaunchEstimate estimate;
};

struct PlanReport {
    std::vector<PlanReportRow> rows;
    std::int64_t layers = 0;
    double bytes_moved = 0, dram_bytes = 0, floor_bytes = 0, floor_flops = 0, host_device_bytes = 0;
    double modelled_seconds = 0, bandwidth = 0, tensor_flops = 0;
    bool sass_read = false;  // the kernels' facts come from their SASS (else from their source's layout)

    double memory_floor_seconds() const { return bandwidth > 0 ? floor_bytes / bandwidth : 0; }
    double compute_floor_seconds() const { return tensor_flops > 0 ? floor_flops / tensor_flops : 0; }
    // A step can be no faster than its bytes at the bandwidth, nor than its flops at the tensor cores' rate.
    double floor_seconds() const { return std::max(memory_floor_seconds(), compute_floor_seconds()); }

    double launches_per_layer() const { return layers > 0 ? static_cast<double>(rows.size()) / static_cast<double>(layers) : 0; }

    io::Json totals() const {
        return {{"launches", rows.size()},
                {"layers", layers},
                {"launches_per_layer", launches_per_layer()},
                {"bytes_moved", bytes_moved},
                {"dram_bytes", dram_bytes},
                {"floor_bytes", floor_bytes},
                {"bytes_over_floor", floor_bytes > 0 ? bytes_moved / floor_bytes : 0.0},
                {"host_device_bytes_per_step", host_device_bytes},
                {"modelled_seconds", modelled_seconds},
                {"floor_flops", floor_flops},
                {"memory_floor_seconds", memory_floor_seconds()},
                {"compute_floor_seconds", compute_floor_seconds()},
                {"floor_seconds", floor_seconds()},
                {"modelled_over_floor", floor_seconds() > 0 ? modelled_seconds / floor_seconds() : 0.0},
                {"bandwidth", bandwidth}};
    }

    std::string to_string() const {
        std::string out = fmt::format("{:>4} {:>6} {:<22} {:<44} {:>6} {:>5} {:>4} {:>5} {:>5} {:>9} {:>5} {:>12} {:>10} {:>8} {:>9} {}\n",
                                      "#", "node", "kernel", "op", "grid", "block", "regs", "stack", "calls", "in-flight", "loop",
                                      "bytes", "flops", "GB/s", "us", "bound");
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const PlanReportRow& r = rows[i];
            const auto fact = [&](auto value) { return r.facts ? fmt::format("{}", value) : std::string("-"); };
            out += fmt::format("{:>4} {:>6} {:<22} {:<44} {:>6} {:>5} {:>4} {:>5} {:>5} {:>9} {:>5} {:>12.0f} {:>10.3g} {:>8.0f} {:>9.2f} {}\n", i,
                               r.launch.node, r.kernel, r.op.substr(0, 44), r.launch.grid, r.launch.block,
                               r.registers ? fmt::format("{}", *r.registers) : std::string("-"), fact(r.facts ? r.facts->stack_bytes : 0),
                               fact(r.facts ? r.facts->calls : 0), fmt::format("{:.0f}{}", r.work.dram_in_flight, r.facts ? "" : "*"),
                               r.work.loop_instructions > 0 && r.work.loop_trips > 0 ? fmt::format("{}", r.work.loop_instructions)
                                                                                     : std::string("-"),
                               r.work.bytes(), r.work.flops + r.work.mma_flops, r.estimate.bandwidth * 1e-9, r.estimate.seconds * 1e6,
                               r.estimate.bound);
        }
        out += fmt::format("launches: {} per step", rows.size());
        if (layers > 0) out += fmt::format(", {:.1f} per layer ({} layers)", launches_per_layer(), layers);
        out += fmt::format("\nbytes moved: {:.4g} GB ({:.4g} GB from DRAM)", bytes_moved * 1e-9, dram_bytes * 1e-9);
        if (floor_bytes > 0) out += fmt::format(", floor {:.4g} GB: {:.3f}x the floor", floor_bytes * 1e-9, bytes_moved / floor_bytes);
        out += fmt::format("\nhost<->device: {:.0f} bytes per step", host_device_bytes);
        out += sass_read ? "\nkernels priced by their SASS: registers, stack, call sites, bytes in flight per thread"
                         : "\nSASS facts unknown (cuobjdump and nvdisasm not found): in-flight bytes marked * are the source "
                           "layout's, the best case";
        out += fmt::format("\nmodelled step: {:.1f} us", modelled_seconds * 1e6);
        if (floor_seconds() > 0)
            out += fmt::format(", floor {:.1f} us (bytes {:.1f} us at {:.3g} TB/s, flops {:.1f} us at {:.3g} TFLOP/s): {:.3f}x the floor",
                               floor_seconds() * 1e6, memory_floor_seconds() * 1e6, bandwidth * 1e-12,
                               compute_floor_seconds() * 1e6, tensor_flops * 1e-12, modelled_seconds / floor_seconds());
        return out + "\nPLAN_RESULT " + totals().dump() + "\n";
    }
};

namespace report_detail {

inline std::string op_text(const NodeSpec& spec) {
    std::string text = symbol_name(spec.kind);
    if (spec.op.payload)
        if (std::string attributes = spec.op.payload->attributes(); !attributes.empty()) text += " " + attributes;
    return text;
}

// The source and entry name of a kernel launch.
inline std::pair<std::string, std::string_view> launch_source(const PlannedLaunch& l, const Plan& plan,
                                                              const std::vector<ProgramNode>& nodes) {
    const PlannedNode& p = plan.nodes[l.node];
    if (p.custom) return {p.custom->source(), p.custom->entry()};
    switch (l.entry) {
        case Entry::ScatterClaim: return {kernel_source(*p.scatter), kScatterClaimEntry};
        case Entry::ScatterWrite: return {kernel_source(*p.scatter), kScatterWriteEntry};
        case Entry::Vector: return {*vector_kernel_source(*p.kernel), kReduceEntry};
        case Entry::Update: return {kernel_source(*p.update), kElementwiseEntry};
        case Entry::Main: break;
    }
    const Kernel k = p.role == PlannedNode::Role::HostOp ? blas_fallback_kernel(nodes[l.node].spec, source_dtypes(nodes, l.node), l.node)
                                                         : *p.kernel;
    return {kernel_source(k), kernel_entry(k)};
}

}  // namespace report_detail

// The report of `program` executed once at `dims`, its work replayed as one CUDA graph.
inline PlanReport plan_report(const Program& unscheduled, const DynMap& dims, const PlanReportOptions& options) {
    using namespace report_detail;
    const Program program = schedule_for_groups(unscheduled);
    const Plan plan = plan_program(program);
    const std::vector<PlannedLaunch> launches =
        plan_launches(plan, program.nodes, dims, options.device.multiprocessors, [](std::uint32_t, std::uint32_t) { return true; });
    const auto costs = plan_costs(plan, program.nodes, launches, dims, options.device);
    PlanReport report;
    report.layers = options.layers;
    report.floor_bytes = options.floor_bytes;
    report.host_device_bytes = options.host_device_bytes;
    report.bandwidth = options.device.bandwidth;
    report.floor_flops = options.floor_flops;
    report.tensor_flops = options.device.tensor_flops;
    std::map<std::pair<std::string, std::string>, std::pair<std::optional<int>, std::optional<SassFacts>>> compiled;
    report.sass_read = options.registers && sass_tools_available();
    for (std::size_t i = 0; i < launches.size(); ++i) {
        const PlannedLaunch& l = launches[i];
        PlanReportRow row;
        row.launch = l;
        row.op = op_text(program.nodes[l.node].spec);
        row.work = costs[i].first;
        std::optional<std::pair<std::string, std::string_view>> source;
        switch (l.kind) {
            case PlannedLaunch::Kind::Memset: row.kernel = "memset"; break;
            case PlannedLaunch::Kind::Copy: row.kernel = "copy"; break;
            case PlannedLaunch::Kind::Blas:
                row.kernel = "cuBLASLt";
                if (!l.members.empty()) row.op += fmt::format(" batch of {}", 1 + l.members.size());
                break;
            case PlannedLaunch::Kind::Group: {
                std::vector<std::pair<std::string, std::string_view>> members;
                row.op = "group:";
                for (const PlannedLaunch& m : l.members) {
                    members.push_back(launch_source(m, plan, program.nodes));
                    row.op += " " + symbol_name(program.nodes[m.node].spec.kind);
                }
                source = std::pair(group_source(members), kGroupEntry);
                break;
            }
            case PlannedLaunch::Kind::Kernel: source = launch_source(l, plan, program.nodes); break;
        }
        if (source) {
            row.kernel = std::string(source->second);
            if (options.registers) {
                auto key = std::make_pair(source->first, row.kernel);
                auto it = compiled.find(key);
                if (it == compiled.end()) {
                    const auto cubin = Nvrtc::get().compile(source->first, 90, row.op);
                    it = compiled.emplace(std::move(key), std::pair(cubin_registers(*cubin, source->second),
                                                                    sass_facts(*cubin, source->second))).first;
                }
                row.registers = it->second.first;
                row.facts = it->second.second;
                if (row.registers) row.work.registers = *row.registers;
                if (row.facts && row.facts->main_loop_bytes_in_flight > 0) row.work.dram_in_flight = row.facts->main_loop_bytes_in_flight;
                if (row.facts && l.kind == PlannedLaunch::Kind::Kernel)  // a group's code is its members' together
                    row.work.loop_instructions = row.facts->main_loop_instructions;
            }
        }
        row.estimate = estimate_launch(row.work, options.device, true);
        report.bytes_moved += row.work.bytes();
        report.dram_bytes += row.work.dram_bytes();
        report.modelled_seconds += row.estimate.seconds;
        report.rows.push_back(std::move(row));
    }
    return report;
}

}  // namespace luminal::cuda

#pragma once
// What one launch costs on a DeviceSpec. A memory-bound kernel moves its bytes
// at the bandwidth its loads in flight sustain (Little's law: bytes in flight
// / latency, capped by the device's bandwidth and by what its busy SMs can
// pull), so a grid smaller than the SM count, or threads that wait on each
// load before issuing the next, cost what they cost; a grid of several waves
// pays for its last partial wave. Compute-bound work runs at the flop rate of
// the SMs it occupies. Where the SASS was read and the kernel knows its main
// loop's trips, the instructions its warps issue there bound the time too, at
// one per scheduler per cycle (the code outside the loop runs between the
// round trips below, in their shadow); so do the memory round trips a kernel
// declares on a block's critical path (each waits its full latency, one after
// the other, once per wave). Every launch pays the launch gap: a CUDA graph
// node's when the step replays a graph, a stream launch's otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <string_view>
#include <tuple>

#include "luminal/cuda/device_spec.hpp"

namespace luminal::cuda {

// A library GEMM's problem: batch products of [m, k] by [k, n].
struct GemmShape {
    double m = 0, n = 0, k = 0, batch = 1;
};

struct LaunchWork {
    enum class Kind : std::uint8_t { Kernel, Memset, Copy, Library } kind = Kind::Kernel;
    std::int64_t grid = 0;
    std::int64_t units = 0;        // pieces of work the grid shares out (0: one per block)
    int block = 256;
    std::size_t shared_bytes = 0;  // per block
    int registers = 0;             // per thread; 0 when not known (then estimated from the loads in flight)
    // Unique bytes: reads of bound data or large results come from DRAM, reads
    // of small results another launch of the step just wrote from L2.
    double dram_read = 0, dram_write = 0, l2_read = 0, l2_write = 0;
    double l2_rereads = 0;         // bytes read again from L2 (by every block that needs them): time, not unique bytes
    double flops = 0;
    double mma_flops = 0;          // a kernel's arithmetic on tensor cores (mma.sync)
    bool tensor_cores = false;     // Library: bf16/f16 products
    GemmShape gemm;                // Library: the product
    // Bytes of independent loads a thread issues before it waits on one (stores never wait).
    double dram_in_flight = 16, l2_in_flight = 16;
    // Memory round trips one after the other on a block's path (0, 0: the one of its first load).
    double dram_round_trips = 0, l2_round_trips = 0;
    // Trips of the main loop summed over the grid's warps (0: not known), and from the SASS the
    // instructions of one trip, every branch in it counted (0: not read).
    double loop_trips = 0;
    int loop_instructions = 0;

    double bytes() const { return dram_read + dram_write + l2_read + l2_write; }
    double dram_bytes() const { return dram_read + dram_write; }
};

struct LaunchEstimate {
    double seconds = 0;
    double bandwidth = 0;   // DRAM bytes/s the launch moves at (its L2 bytes aside)
    double occupancy = 0;   // resident threads / the device's thread slots
    std::string_view bound = "launch";  // the term its time is set by: launch, dram, l2, compute, issue or latency
};

// Registers a thread needs: the loads in flight held in registers, plus the
// kernel's own working set.
inline int estimated_registers(double bytes_in_flight_per_thread) {
    return std::clamp(static_cast<int>(32 + bytes_in_flight_per_thread / 4), 32, 255);
}

// cuBLASLt's tensor-core GEMM at the rate it reaches on large square shapes
// (`tensor_flops`), less what a shape loses there: its output is cut in
// tiles (128x256, 128x128 or 64x128; the best for the shape, as the library's
// heuristic picks), an edge tile costs a whole one, the tiles run one per SM
// in waves so an idle part of the last wave costs its time, and each tile's
// K loop starts after about three 64-deep slices of pipeline fill. Splitting
// K over idle SMs is not priced: the extraction, which does not see launch
// groups, then took the library for one-row products that the grouped Gemvs
// stream faster; so a product of few tiles is priced high.
inline double tensor_gemm_seconds(const GemmShape& g, const DeviceSpec& d) {
    constexpr double kFillDepth = 3 * 64;
    const double per_sm = d.tensor_flops / d.multiprocessors;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [rows, cols] : {std::pair{128.0, 256.0}, std::pair{128.0, 128.0}, std::pair{64.0, 128.0}}) {
        const double tiles = std::ceil(g.m / rows) * std::ceil(g.n / cols) * g.batch;
        const double waves = std::ceil(tiles / d.multiprocessors);
        best = std::min(best, waves * 2 * rows * cols * (g.k + kFillDepth) / per_sm);
    }
    return best;
}

inline LaunchEstimate estimate_launch(const LaunchWork& w, const DeviceSpec& d, bool in_graph) {
    LaunchEstimate e;
    const double launch = in_graph ? d.graph_launch_seconds : d.stream_launch_seconds;
    if (w.kind == LaunchWork::Kind::Memset || w.kind == LaunchWork::Kind::Copy) {
        e.bandwidth = d.bandwidth;
        e.seconds = launch + w.dram_bytes() / d.bandwidth + (w.l2_read + w.l2_write) / d.l2_bandwidth;
        e.bound = "dram";
        return e;
    }
    if (w.kind == LaunchWork::Kind::Library) {
        e.bandwidth = d.bandwidth;
        const double memory = w.bytes() / d.bandwidth;
        const double compute = w.tensor_cores ? tensor_gemm_seconds(w.gemm, d) : w.flops / d.flops;
        // Its first loads wait a DRAM latency, as any kernel's.
        e.seconds = launch + d.memory_latency + std::max(memory, compute);
        e.bound = memory >= compute ? "dram" : "compute";
        return e;
    }
    if (w.grid <= 0) return e;
    const int registers = w.registers > 0 ? w.registers : estimated_registers(w.dram_in_flight + w.l2_in_flight);
    std::int64_t resident = std::min<std::int64_t>(d.blocks_per_sm, d.threads_per_sm / std::max(w.block, 1));
    resident = std::min<std::int64_t>(resident, d.registers_per_sm / std::max(registers * w.block, 1));
    if (w.shared_bytes > 0) resident = std::min<std::int64_t>(resident, static_cast<std::int64_t>(d.shared_per_sm / w.shared_bytes));
    resident = std::max<std::int64_t>(resident, 1);
    const std::int64_t slots = resident * d.multiprocessors;
    const std::int64_t concurrent = std::min(w.grid, slots);
    e.occupancy = static_cast<double>(concurrent) * w.block / (static_cast<double>(d.threads_per_sm) * d.multiprocessors);
    // The units run in waves of `concurrent` blocks (a persistent grid's blocks
    // take units in turn); a wave moves its share of the bytes at the rate its
    // blocks' loads in flight sustain, so a short last wave is slow.
    const double units = static_cast<double>(std::max<std::int64_t>(w.units > 0 ? w.units : w.grid, 1));
    auto over = [](double bytes, double rate) { return bytes > 0 ? bytes / std::max(rate, 1.0) : 0.0; };
    const double warp_instructions = w.loop_trips * w.loop_instructions;
    auto wave_seconds = [&](double blocks) {
        const double share = std::min(blocks, units) / units, threads = blocks * w.block;
        const double busy_sms = std::min(blocks, static_cast<double>(d.multiprocessors));
        const double sm_cap = busy_sms * d.sm_bandwidth;
        const double dram_rate = std::min({d.bandwidth, threads * w.dram_in_flight / d.memory_latency, sm_cap});
        const double l2_rate = std::min({d.l2_bandwidth, threads * w.l2_in_flight / d.l2_latency, sm_cap});
        const double memory = std::max(over(w.dram_read * share, dram_rate) + over(w.dram_write * share, d.bandwidth),
                                       over((w.l2_read + w.l2_rereads) * share, l2_rate) + over(w.l2_write * share, d.l2_bandwidth));
        const double compute = (w.flops / d.flops + w.mma_flops / d.mma_sync_flops) * share / (busy_sms / d.multiprocessors);
        const double issue = warp_instructions * share / (busy_sms * d.issue_rate);
        const double dram = over(w.dram_read * share, dram_rate) + over(w.dram_write * share, d.bandwidth);
        const double slowest = std::max({memory, compute, issue});
        const std::string_view bound = slowest == memory ? (dram >= memory ? "dram" : "l2") : slowest == compute ? "compute" : "issue";
        return std::tuple(slowest, dram_rate, bound);
    };
    const double full_waves = std::floor(units / static_cast<double>(concurrent));
    const double last = units - full_waves * static_cast<double>(concurrent);
    const auto [full, rate, bound] = wave_seconds(static_cast<double>(concurrent));
    e.bandwidth = rate;
    e.bound = bound;
    double busy = full_waves * full;
    if (last > 0) busy += std::get<0>(wave_seconds(last));
    const double latency = w.dram_read > 0 ? d.memory_latency : d.l2_latency;
    const double chain = (full_waves + (last > 0 ? 1 : 0)) * (w.dram_round_trips * d.memory_latency + w.l2_round_trips * d.l2_latency);
    e.seconds = launch + std::max(latency + busy, chain);
    if (chain > latency + busy) e.bound = "latency";
    else if (launch + latency > busy) e.bound = "launch";
    return e;
}

}  // namespace luminal::cuda

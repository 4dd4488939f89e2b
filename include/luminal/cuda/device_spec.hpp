#pragma once
// The GPU the CUDA backend plans and prices for. The defaults are an H200's:
// 132 SMs; HBM3e at 4.8 TB/s of which a streaming kernel reaches ~4.3 TB/s;
// ~0.8 us for a DRAM load under load; a kernel node of a replayed CUDA graph
// ~1.5 us from the end of the one before (a stream launch ~4 us); f32 FMA at
// ~60 TFLOP/s, dense bf16 tensor-core products at ~700 TFLOP/s in cuBLASLt
// and a third of that in generated mma.sync kernels. They are
// estimates until a device run measures them (scripts/gpu_check.sh prints
// the modelled and the measured time of each step side by side).
#include <cstddef>
#include <cstdint>

namespace luminal::cuda {

struct DeviceSpec {
    int multiprocessors = 132;
    double bandwidth = 4.3e12;         // DRAM bytes/s a kernel with enough loads in flight streams
    double memory_latency = 8e-7;      // seconds from a DRAM load's issue to its data, under load
    double l2_bandwidth = 1.0e13;      // bytes/s of reads that hit L2 (data a kernel of the same step wrote)
    double l2_latency = 3e-7;
    std::size_t l2_resident_bytes = 4u << 20;  // a result this small, written this step, is read from L2
    double sm_bandwidth = 1.2e11;      // bytes/s one SM's loads can pull at most
    double graph_launch_seconds = 1.5e-6;
    double stream_launch_seconds = 4e-6;
    double flops = 6.0e13;             // f32 FMA, flop/s
    double tensor_flops = 7.0e14;      // bf16/f16 products with f32 accumulation (cuBLASLt), flop/s
    double mma_sync_flops = 2.3e14;    // the same from generated kernels' mma.sync on shared-memory tiles (no async copies)
    double issue_rate = 7.0e9;         // warp instructions one SM issues per second (4 schedulers at 1.755 GHz)
    int threads_per_sm = 2048;
    int blocks_per_sm = 32;
    int registers_per_sm = 65536;
    std::size_t shared_per_sm = 228u * 1024;
    std::size_t shared_per_block = 227u * 1024;
    std::uint64_t memory_bytes = 141'000'000'000;  // what a program's buffers can take (an H200's HBM3e)
};

}  // namespace luminal::cuda

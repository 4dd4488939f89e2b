// The launch cost model's terms, each isolated by a launch whose other terms
// are small, against values worked out by hand from the DeviceSpec: bytes over
// the rate the loads in flight sustain, instructions over the issue rate, and
// a chain of round trips paid once per wave.
#include <doctest/doctest.h>

#include <luminal/cuda/launch_cost.hpp>

using namespace luminal::cuda;

namespace {

// 132 blocks of 256 threads, one 16-byte load each: one wave on the default device.
LaunchWork one_load_per_thread() {
    LaunchWork w;
    w.grid = 132;
    w.block = 256;
    w.registers = 64;
    w.dram_read = 132.0 * 256 * 16;
    w.dram_in_flight = 16;
    return w;
}

}  // namespace

TEST_CASE("launch cost: bytes at the rate their loads in flight sustain, with the launch gap and one latency") {
    const DeviceSpec d;
    const LaunchEstimate e = estimate_launch(one_load_per_thread(), d, true);
    // 33,792 threads x 16 B in flight / 0.8 us = 676 GB/s, below the DRAM and SM caps: 0.8 us for the bytes.
    CHECK(e.bandwidth == doctest::Approx(132.0 * 256 * 16 / 8e-7));
    CHECK(e.seconds == doctest::Approx(1.5e-6 + 0.8e-6 + 0.8e-6));
    CHECK(e.bound == "launch");
}

TEST_CASE("launch cost: instructions are priced only where the kernel knows its loop's trips") {
    const DeviceSpec d;
    LaunchWork w = one_load_per_thread();
    w.loop_instructions = 50;
    const double unpriced = estimate_launch(w, d, true).seconds;
    CHECK(unpriced == doctest::Approx(3.1e-6));
    // 100 trips per warp: 132 x 8 x 100 x 50 warp instructions over 132 SMs at 7e9 per second.
    w.loop_trips = 132.0 * 8 * 100;
    const LaunchEstimate e = estimate_launch(w, d, true);
    const double issue = 132.0 * 8 * 100 * 50 / (132 * 7.0e9);
    CHECK(e.seconds == doctest::Approx(1.5e-6 + 0.8e-6 + issue));
    CHECK(e.bound == "issue");
}

TEST_CASE("launch cost: a block's round trips one after the other, once per wave") {
    const DeviceSpec d;
    LaunchWork w = one_load_per_thread();
    w.dram_round_trips = 10;
    w.l2_round_trips = 5;
    const LaunchEstimate one_wave = estimate_launch(w, d, true);
    CHECK(one_wave.seconds == doctest::Approx(1.5e-6 + 10 * 0.8e-6 + 5 * 0.3e-6));
    CHECK(one_wave.bound == "latency");
    // 128 registers: two 256-thread blocks per SM, so 528 blocks run in two waves and pay the chain twice.
    w.registers = 128;
    w.grid = 528;
    w.dram_read *= 4;
    const LaunchEstimate two_waves = estimate_launch(w, d, true);
    CHECK(two_waves.seconds == doctest::Approx(1.5e-6 + 2 * (10 * 0.8e-6 + 5 * 0.3e-6)));
}

TEST_CASE("launch cost: a tensor-core library GEMM pays for its tiles, its waves, its pipeline fill and a DRAM latency") {
    const DeviceSpec d;  // 132 SMs, 7.0e14 flop/s: 5.303e12 per SM
    const double per_sm = 7.0e14 / 132;
    // 130 x 4096 x 4096: 128x256 tiles 2 x 16 = 32, 128x128 2 x 32 = 64, 64x128 3 x 32 = 96: each one wave;
    // the 64x128 tile does the least, 2 x 64 x 128 x (4096 + 192) flops.
    CHECK(tensor_gemm_seconds({130, 4096, 4096, 1}, d) == doctest::Approx(2.0 * 64 * 128 * 4288 / per_sm));
    // 1024 x 14336 x 4096: 128x256: 8 x 56 = 448 tiles, 4 waves; 128x128: 896, 7 waves (2 x 128 x 128 x 4288 each);
    // 64x128: 1792, 14 waves of half that: 128x128 and 64x128 tie at 7 x 140.5 Mflop.
    const double seconds = tensor_gemm_seconds({1024, 14336, 4096, 1}, d);
    CHECK(seconds == doctest::Approx(7 * 2.0 * 128 * 128 * 4288 / per_sm));
    // Against the flops at the full rate: 924 tile slots for 896 tiles, and 4288 / 4096 for the fill: 8% more.
    CHECK(seconds / (2.0 * 1024 * 14336 * 4096 / 7.0e14) == doctest::Approx(924.0 / 896 * 4288 / 4096));
    // A batch multiplies the tiles.
    CHECK(tensor_gemm_seconds({64, 128, 128, 264}, d) == doctest::Approx(2 * 2.0 * 64 * 128 * 320 / per_sm));

    LaunchWork w;
    w.kind = LaunchWork::Kind::Library;
    w.tensor_cores = true;
    w.gemm = {1024, 14336, 4096, 1};
    w.flops = 2.0 * 1024 * 14336 * 4096;
    w.dram_read = 14336.0 * 4096 * 2 + 1024.0 * 4096 * 2;
    w.dram_write = 1024.0 * 14336 * 4;
    const LaunchEstimate e = estimate_launch(w, d, true);
    CHECK(e.seconds == doctest::Approx(1.5e-6 + 0.8e-6 + seconds));
    CHECK(e.bound == "compute");
}

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

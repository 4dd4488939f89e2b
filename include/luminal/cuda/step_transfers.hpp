#pragma once
// What crosses between host and device in one execution, as the CUDA runtime
// moves it: the dims slots that changed since the last execution (the dims
// live in device memory), the fault code read back with the step (the rest of
// the fault record only when a kernel reported one), the inputs bound for it,
// and the outputs read from it (those of at most kPrefetchedOutputBytes come
// back with the step's one synchronisation). The runtime and the plan report
// both count with these, so the report's host<->device bytes are the runtime's.
#include <array>
#include <cstddef>
#include <cstdint>

#include "luminal/cuda/kernel_source.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal::cuda {

using DimSlots = std::array<std::int64_t, kDimSlots>;

inline constexpr std::size_t kFaultCodeBytes = sizeof(std::int64_t);
inline constexpr std::size_t kPrefetchedOutputBytes = 256;

inline DimSlots dim_slots(const DynMap& dims) {
    DimSlots slots{};
    for (auto [c, v] : dims.entries())
        if (DynMap::valid_name(c)) slots[static_cast<std::size_t>(dim_slot(c))] = v;
    return slots;
}

// The slots [first, last) to upload so the device holds `now` after `before`; empty when nothing changed.
inline std::pair<std::size_t, std::size_t> changed_slots(const DimSlots& before, const DimSlots& now) {
    std::size_t first = kDimSlots, last = 0;
    for (std::size_t i = 0; i < kDimSlots; ++i)
        if (before[i] != now[i]) first = std::min(first, i), last = i + 1;
    return first < last ? std::pair(first, last) : std::pair<std::size_t, std::size_t>(0, 0);
}

// Bytes one execution at `dims`, after one at `previous`, moves between host
// and device, given the bytes of the inputs bound for it and of the outputs read.
inline std::size_t step_transfer_bytes(const DynMap& previous, const DynMap& dims, std::size_t input_bytes,
                                       std::size_t output_bytes) {
    const auto [first, last] = changed_slots(dim_slots(previous), dim_slots(dims));
    return (last - first) * sizeof(std::int64_t) + kFaultCodeBytes + input_bytes + output_bytes;
}

}  // namespace luminal::cuda

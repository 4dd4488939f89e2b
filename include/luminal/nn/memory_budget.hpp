#pragma once
// What a session's memory is for, checked before it is allocated: the
// weights, the KV caches at their capacity and the runtime's intermediate
// buffers (its arena), against what the machine can give (MemAvailable, and
// the cgroup's limit where one is set) or a limit the user sets. Over it is
// a luminal::Error that says how much is needed, for what, and which option
// lowers it, never an abort on std::bad_alloc half-way through a load.
#include <algorithm>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/runtime/available_memory.hpp"

namespace luminal::nn {

struct MemoryUse {
    std::string what;        // "KV cache (4096 tokens x 30 layers, f32)"
    std::uint64_t bytes = 0;
    std::string lowered_by;  // the option that makes it smaller; empty where none does
    // Where the use grows by `unit_bytes` per unit (a token of context): the
    // Error then says how many units fit.
    std::uint64_t unit_bytes = 0;
    std::string unit;
};

// The most a session may hold; unset: what the machine has available when it starts.
struct MemoryLimit {
    std::optional<std::uint64_t> max_bytes;
};

inline std::string format_bytes(std::uint64_t bytes) {
    constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (v >= 1024 && unit + 1 < std::size(kUnits)) v /= 1024, ++unit;
    return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[unit]);
}

// Throws when `uses` together exceed `limit` (or, unset, the memory `available`
// to the runtime): each use with its bytes and the option that lowers it, largest first.
inline void check_memory(std::vector<MemoryUse> uses, const MemoryLimit& limit, const std::optional<AvailableMemory>& available,
                         std::string_view where) {
    std::uint64_t total = 0;
    for (const MemoryUse& u : uses) total += u.bytes;
    std::uint64_t allowed = 0;
    std::string source;
    if (limit.max_bytes) {
        allowed = *limit.max_bytes;
        source = "the limit set (MemoryLimit::max_bytes, generate's --max-memory)";
    } else if (available) {
        allowed = available->bytes;
        source = fmt::format("what is available ({})", available->source);
    } else {
        return;
    }
    if (total <= allowed) return;
    std::sort(uses.begin(), uses.end(), [](const MemoryUse& a, const MemoryUse& b) { return a.bytes > b.bytes; });
    std::string parts;
    for (const MemoryUse& u : uses) {
        if (u.bytes == 0) continue;
        parts += fmt::format("\n  {}: {}", u.what, format_bytes(u.bytes));
        if (!u.lowered_by.empty()) parts += fmt::format(" (lowered by {}", u.lowered_by);
        if (!u.lowered_by.empty() && u.unit_bytes > 0) {
            const std::uint64_t others = total - u.bytes;
            parts += fmt::format(": {} {} fit", others < allowed ? (allowed - others) / u.unit_bytes : 0, u.unit);
        }
        if (!u.lowered_by.empty()) parts += ")";
    }
    throw Error(std::string(where), fmt::format("needs {} of memory, more than the {} of {}:{}", format_bytes(total),
                                                format_bytes(allowed), source, parts));
}

// Runs f; std::bad_alloc from it becomes an Error that says what ran out.
template <typename F>
decltype(auto) reporting_out_of_memory(std::string_view where, std::string_view doing, F&& f) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        throw Error(std::string(where), fmt::format("out of memory while {}", doing));
    }
}

}  // namespace luminal::nn

#pragma once
// What a session's memory is for, checked before it is allocated: the
// weights, the KV caches at their capacity and the runtime's intermediate
// buffers (its arena), against what the machine can give (MemAvailable, and
// the cgroup's limit where one is set) or a limit the user sets. Over it is
// a luminal::Error that says how much is needed, for what, and which option
// lowers it, never an abort on std::bad_alloc half-way through a load.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/core/error.hpp"

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

namespace memory_detail {

// A "Name:  123 kB" line of /proc/meminfo, in bytes.
inline std::optional<std::uint64_t> meminfo_bytes(std::string_view name) {
    std::ifstream in("/proc/meminfo");
    for (std::string line; std::getline(in, line);)
        if (line.starts_with(name) && line.size() > name.size() && line[name.size()] == ':')
            return std::stoull(line.substr(name.size() + 1)) * 1024;
    return std::nullopt;
}

// A cgroup v2 file holding one number ("max" where unlimited).
inline std::optional<std::uint64_t> cgroup_number(const char* path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max") return std::nullopt;
    try {
        return std::stoull(word);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace memory_detail

// Bytes this process can still allocate, and where the number comes from;
// nullopt where the system says nothing (not Linux).
struct AvailableMemory {
    std::uint64_t bytes = 0;
    std::string source;
};
inline std::optional<AvailableMemory> available_memory() {
    std::optional<AvailableMemory> out;
    if (auto avail = memory_detail::meminfo_bytes("MemAvailable")) out = AvailableMemory{*avail, "MemAvailable"};
    const auto limit = memory_detail::cgroup_number("/sys/fs/cgroup/memory.max");
    const auto used = memory_detail::cgroup_number("/sys/fs/cgroup/memory.current");
    if (limit && used) {
        const std::uint64_t left = *limit > *used ? *limit - *used : 0;
        if (!out || left < out->bytes) out = AvailableMemory{left, "the cgroup's memory.max less memory.current"};
    }
    return out;
}

// Throws when `uses` together exceed `limit` (or, unset, the memory available):
// each use with its bytes and the option that lowers it, largest first.
inline void check_memory(std::vector<MemoryUse> uses, const MemoryLimit& limit, std::string_view where) {
    std::uint64_t total = 0;
    for (const MemoryUse& u : uses) total += u.bytes;
    std::uint64_t allowed = 0;
    std::string source;
    if (limit.max_bytes) {
        allowed = *limit.max_bytes;
        source = "the limit set (MemoryLimit::max_bytes, generate's --max-memory)";
    } else if (auto available = available_memory()) {
        allowed = available->bytes;
        source = fmt::format("what this machine has available ({})", available->source);
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

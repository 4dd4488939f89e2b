#pragma once
// Memory a runtime can still allocate, and where the figure comes from. The
// host's is MemAvailable, or the cgroup's limit less its use where lower; a
// runtime whose buffers live elsewhere (a GPU's) says so with a member
// available_memory() of its own.
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace luminal {

struct AvailableMemory {
    std::uint64_t bytes = 0;
    std::string source;
};

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

// Bytes this process can still allocate on the host, and where the number
// comes from; nullopt where the system says nothing (not Linux).
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


// What `runtime` can allocate: its own figure where it has one, else the host's.
template <typename Runtime>
std::optional<AvailableMemory> available_memory_of(const Runtime& runtime) {
    if constexpr (requires { runtime.available_memory(); }) return runtime.available_memory();
    else return available_memory();
}

}  // namespace luminal

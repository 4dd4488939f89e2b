#pragma once
// Device memory for the CUDA runtime: an owned allocation, and the arena plan
// that places a program's intermediate results by liveness (a result's block
// is reused once its last reader has run), recomputed only when the sizes
// (the dims) change.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "luminal/cuda/driver.hpp"

namespace luminal::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0, o.bytes_ = 0; }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    ~DeviceBuffer() { release(); }

    // At least `bytes` (contents not kept when it grows). True when the address changed.
    bool reserve(std::size_t bytes) {
        if (bytes <= bytes_ && ptr_ != 0) return false;
        release();
        const Driver& d = Driver::get();
        const std::size_t asked = std::max<std::size_t>(bytes, 256);
        const CuResult result = d.api().mem_alloc(&ptr_, asked);
        if (result == kOutOfMemory) {
            ptr_ = 0;
            const auto [free, total] = d.memory();
            throw Error("cuda", fmt::format("out of device memory: asked for {} bytes ({:.1f} MiB), {:.1f} MiB free of {:.1f} MiB",
                                            asked, mib(asked), mib(free), mib(total)));
        }
        d.check_call(result, "cuMemAlloc");
        bytes_ = asked;
        return true;
    }
    CuDevicePtr ptr() const { return ptr_; }
    std::size_t bytes() const { return bytes_; }

private:
    static constexpr CuResult kOutOfMemory = 2;
    static double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
    void release() {
        if (ptr_ != 0) Driver::get().api().mem_free(ptr_);
        ptr_ = 0;
        bytes_ = 0;
    }
    CuDevicePtr ptr_ = 0;
    std::size_t bytes_ = 0;
};

// Page-locked host memory: copies to and from it run asynchronously on the
// stream, so a step's small transfers need no synchronisation of their own.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    ~PinnedBuffer() {
        if (ptr_) Driver::get().api().mem_free_host(ptr_);
    }
    // At least `bytes` (contents not kept when it grows).
    void reserve(std::size_t bytes) {
        if (bytes <= bytes_ && ptr_) return;
        if (ptr_) Driver::get().api().mem_free_host(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
        const std::size_t asked = std::max<std::size_t>(bytes, 64);
        Driver::get().check_call(Driver::get().api().mem_host_alloc(&ptr_, asked, 0), "cuMemHostAlloc");
        bytes_ = asked;
    }
    std::byte* data() const { return static_cast<std::byte*>(ptr_); }
    std::size_t bytes() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

inline constexpr std::size_t kArenaAlignment = 256;  // what 16-byte vector loads and cuBLASLt want, with room

// Offsets of blocks with lifetimes [first, last] (node indices) in one arena:
// first fit over the free ranges, in order of `first`.
struct ArenaPlan {
    std::vector<std::size_t> offsets;
    std::size_t bytes = 0;
};

struct ArenaRequest {
    std::size_t bytes;
    std::uint32_t first, last;
};

inline ArenaPlan plan_arena(const std::vector<ArenaRequest>& requests) {
    struct Live {
        std::size_t offset, bytes;
        std::uint32_t last;
    };
    ArenaPlan plan;
    plan.offsets.assign(requests.size(), 0);
    std::vector<std::size_t> order(requests.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return requests[a].first < requests[b].first; });
    std::vector<Live> live;  // sorted by offset
    for (std::size_t i : order) {
        const ArenaRequest& r = requests[i];
        std::erase_if(live, [&](const Live& l) { return l.last < r.first; });
        const std::size_t bytes = (r.bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
        std::size_t at = 0;
        auto it = live.begin();
        for (; it != live.end(); ++it) {
            if (it->offset >= at + bytes) break;
            at = std::max(at, it->offset + it->bytes);
        }
        live.insert(it, Live{at, bytes, r.last});
        plan.offsets[i] = at;
        plan.bytes = std::max(plan.bytes, at + bytes);
    }
    return plan;
}

}  // namespace luminal::cuda

#pragma once
// A byte buffer aligned for vector loads. One of kMappedBytes or more is
// anonymous memory mapped from the kernel: it reads as zeros and takes memory
// only where written, so a KV cache sized for a long context costs the rows a
// generation fills, and binding it costs no time. Out of memory is a
// luminal::Error naming the bytes asked for, never std::bad_alloc.
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#include "luminal/core/error.hpp"

namespace luminal::cpu {

class AlignedBuffer {
public:
    static constexpr std::size_t kAlign = 64;
    static constexpr std::size_t kMappedBytes = std::size_t{1} << 20;

    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes) { reserve(bytes); }
    // `bytes` of zeros (mapped pages are zero already: nothing is written).
    static AlignedBuffer zeroed(std::size_t bytes) {
        AlignedBuffer b(bytes);
        if (!b.mapped_) std::memset(b.data_, 0, b.capacity_);
        return b;
    }
    AlignedBuffer(const AlignedBuffer& o) {
        if (!o.data_) return;
        reserve(o.capacity_);
        std::memcpy(data_, o.data_, o.capacity_);
    }
    AlignedBuffer(AlignedBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), capacity_(std::exchange(o.capacity_, 0)),
          mapped_(std::exchange(o.mapped_, false)) {}
    AlignedBuffer& operator=(AlignedBuffer o) noexcept {
        std::swap(data_, o.data_);
        std::swap(capacity_, o.capacity_);
        std::swap(mapped_, o.mapped_);
        return *this;
    }
    ~AlignedBuffer() { release(); }

    std::byte* data() const { return data_; }
    std::size_t capacity() const { return capacity_; }
    // Grows to at least `bytes`; the contents are not kept.
    void reserve(std::size_t bytes) {
        if (bytes <= capacity_ && data_) return;
        release();
        const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
        if (rounded >= kMappedBytes) {
            void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) out_of_memory(rounded);
            data_ = static_cast<std::byte*>(p);
            mapped_ = true;
        } else {
            try {
                data_ = static_cast<std::byte*>(::operator new(rounded, std::align_val_t{kAlign}));
            } catch (const std::bad_alloc&) {
                out_of_memory(rounded);
            }
        }
        capacity_ = rounded;
    }

private:
    [[noreturn]] static void out_of_memory(std::size_t bytes) {
        throw Error("CPU memory", fmt::format("cannot allocate a buffer of {:.1f} MiB: the system refused it (out of "
                                              "memory)", static_cast<double>(bytes) / (1 << 20)));
    }
    void release() {
        if (data_ && mapped_) ::munmap(data_, capacity_);
        else if (data_) ::operator delete(data_, std::align_val_t{kAlign});
        data_ = nullptr;
        capacity_ = 0;
        mapped_ = false;
    }
    std::byte* data_ = nullptr;
    std::size_t capacity_ = 0;
    bool mapped_ = false;
};

}  // namespace luminal::cpu

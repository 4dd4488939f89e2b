#pragma once
// An allocator for large, randomly accessed arrays (the e-graph's hash-cons):
// blocks of 2 MiB or more are aligned to 2 MiB and marked for transparent huge
// pages, so each probe costs no TLB miss. Small blocks and other systems use
// the plain heap.
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace luminal {

template <typename T>
struct HugePageAllocator {
    using value_type = T;
    static constexpr std::size_t kHugePage = std::size_t{2} << 20;

    HugePageAllocator() = default;
    template <typename U>
    HugePageAllocator(const HugePageAllocator<U>&) {}

    T* allocate(std::size_t n) {
        constexpr std::size_t kMaxBytes = std::numeric_limits<std::ptrdiff_t>::max() - kHugePage;
        if (n > kMaxBytes / sizeof(T)) throw std::bad_array_new_length();
        std::size_t bytes = n * sizeof(T);
        if (bytes < kHugePage) return std::allocator<T>{}.allocate(n);
        std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
        void* p = std::aligned_alloc(kHugePage, rounded);
        if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
        madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure only costs speed
#endif
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) {
        if (n * sizeof(T) < kHugePage) std::allocator<T>{}.deallocate(p, n);
        else std::free(p);
    }
    template <typename U>
    bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace luminal

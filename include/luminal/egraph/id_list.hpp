#pragma once
// IdList: the e-node ids of one e-class (its nodes, or its parents). Most
// classes hold one or two, so two live inline; longer lists move to a block
// of a power-of-two size from an IdBlockPool. Merges free and grow lists all
// the time, and the pool's free lists make that a push and a pop instead of
// a malloc and a free. IdList is trivially copyable on purpose: the vector of
// classes then grows by a plain memory copy. Its owner hands the block back
// with release().
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace luminal::egraph {

class IdBlockPool {
public:
    IdBlockPool() = default;
    IdBlockPool(const IdBlockPool&) = delete;
    IdBlockPool& operator=(const IdBlockPool&) = delete;

    // A block of 2^size_class ids: a freed one, or carved from a slab (a
    // saturation takes hundreds of fresh blocks; a malloc each is not free).
    std::uint32_t* take(int size_class) {
        auto& blocks = free_[static_cast<std::size_t>(size_class)];
        if (!blocks.empty()) {
            std::uint32_t* block = blocks.back();
            blocks.pop_back();
            return block;
        }
        std::size_t size = std::size_t{1} << size_class;
        if (size > slab_left_) {
            std::size_t slab = std::max(size, kSlabIds);
            slabs_.push_back(std::make_unique_for_overwrite<std::uint32_t[]>(slab));
            slab_next_ = slabs_.back().get();
            slab_left_ = slab;
        }
        slab_left_ -= size;
        return std::exchange(slab_next_, slab_next_ + size);
    }
    void give(std::uint32_t* block, int size_class) { free_[static_cast<std::size_t>(size_class)].push_back(block); }

private:
    static constexpr std::size_t kSlabIds = std::size_t{1} << 14;  // 64 KiB
    std::array<std::vector<std::uint32_t*>, 33> free_;
    std::vector<std::unique_ptr<std::uint32_t[]>> slabs_;
    std::uint32_t* slab_next_ = nullptr;
    std::size_t slab_left_ = 0;
};

class IdList {
public:
    std::uint32_t size() const { return size_; }
    const std::uint32_t* begin() const { return data(); }
    const std::uint32_t* end() const { return data() + size_; }
    operator std::span<const std::uint32_t>() const { return {data(), size_}; }

    void push_back(std::uint32_t id, IdBlockPool& pool) {
        if (size_ == capacity_) grow(size_ + 1, pool);
        data()[size_++] = id;
    }
    void append(std::span<const std::uint32_t> ids, IdBlockPool& pool) {
        if (ids.empty()) return;
        if (size_ + ids.size() > capacity_) grow(size_ + static_cast<std::uint32_t>(ids.size()), pool);
        std::memcpy(data() + size_, ids.data(), ids.size() * sizeof(std::uint32_t));
        size_ += static_cast<std::uint32_t>(ids.size());
    }
    // Keeps the ids for which keep(id) is true, in order.
    template <typename Keep>
    void filter(Keep&& keep) {
        std::uint32_t* d = data();
        size_ = static_cast<std::uint32_t>(std::remove_if(d, d + size_, [&](std::uint32_t id) { return !keep(id); }) - d);
    }
    // Returns the block (if any) to the pool and empties the list.
    void release(IdBlockPool& pool) {
        if (capacity_ > kInline) pool.give(heap_, std::countr_zero(capacity_));
        size_ = 0;
        capacity_ = kInline;
    }

private:
    static constexpr std::uint32_t kInline = 2;
    std::uint32_t* data() { return capacity_ > kInline ? heap_ : inline_; }
    const std::uint32_t* data() const { return capacity_ > kInline ? heap_ : inline_; }
    void grow(std::uint32_t needed, IdBlockPool& pool) {
        std::uint32_t capacity = std::bit_ceil(std::max(needed, std::uint32_t{8}));
        std::uint32_t* block = pool.take(std::countr_zero(capacity));
        std::memcpy(block, data(), size_ * sizeof(std::uint32_t));
        if (capacity_ > kInline) pool.give(heap_, std::countr_zero(capacity_));
        heap_ = block;
        capacity_ = capacity;
    }

    std::uint32_t size_ = 0;
    std::uint32_t capacity_ = kInline;
    union {
        std::uint32_t inline_[kInline];
        std::uint32_t* heap_;
    };
};

}  // namespace luminal::egraph

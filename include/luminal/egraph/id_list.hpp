#pragma once
// IdList: the e-node ids of one e-class (its nodes, or its parents). Most
// classes hold one or two, so two live inline; longer lists move to the heap.
// It is trivially copyable on purpose: the vector of classes then grows by a
// plain memory copy. Its owner frees the heap block with release().
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

namespace luminal::egraph {

class IdList {
public:
    std::uint32_t size() const { return size_; }
    const std::uint32_t* begin() const { return data(); }
    const std::uint32_t* end() const { return data() + size_; }
    operator std::span<const std::uint32_t>() const { return {data(), size_}; }

    void push_back(std::uint32_t id) {
        if (size_ == capacity_) grow(size_ + 1);
        data()[size_++] = id;
    }
    void append(std::span<const std::uint32_t> ids) {
        if (ids.empty()) return;
        if (size_ + ids.size() > capacity_) grow(size_ + static_cast<std::uint32_t>(ids.size()));
        std::memcpy(data() + size_, ids.data(), ids.size() * sizeof(std::uint32_t));
        size_ += static_cast<std::uint32_t>(ids.size());
    }
    // Keeps the ids for which keep(id) is true, in order.
    template <typename Keep>
    void filter(Keep&& keep) {
        std::uint32_t* d = data();
        size_ = static_cast<std::uint32_t>(std::remove_if(d, d + size_, [&](std::uint32_t id) { return !keep(id); }) - d);
    }
    // Frees the heap block (if any) and empties the list.
    void release() {
        if (capacity_ > kInline) delete[] heap_;
        size_ = 0;
        capacity_ = kInline;
    }

private:
    static constexpr std::uint32_t kInline = 2;
    std::uint32_t* data() { return capacity_ > kInline ? heap_ : inline_; }
    const std::uint32_t* data() const { return capacity_ > kInline ? heap_ : inline_; }
    void grow(std::uint32_t needed) {
        std::uint32_t capacity = std::max({needed, capacity_ * 2, std::uint32_t{8}});
        auto* block = new std::uint32_t[capacity];
        std::memcpy(block, data(), size_ * sizeof(std::uint32_t));
        if (capacity_ > kInline) delete[] heap_;
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

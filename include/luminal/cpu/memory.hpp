#pragma once
// Memory for the CPU backend's intermediate buffers. The runtime frees a
// buffer as soon as its last consumer has run (liveness from the program
// order), and the next node that needs memory takes the smallest free block
// that is big enough (best fit over a free list keyed by capacity), or a new
// block when none fits well. Blocks are kept across executions, so a
// steady-state execute allocates nothing.
#include <cstddef>
#include <map>
#include <vector>

#include "luminal/cpu/aligned_buffer.hpp"

namespace luminal::cpu {

class BufferPool {
public:
    using BlockId = std::size_t;

    // Every block becomes free again (the start of an execution).
    void reset() {
        free_.clear();
        for (BlockId i = 0; i < blocks_.size(); ++i) free_.emplace(blocks_[i].capacity(), i);
    }
    void clear() {
        blocks_.clear();
        free_.clear();
        held_ = 0;
    }

    BlockId acquire(std::size_t bytes) {
        // The smallest free block that fits, unless it would waste more than
        // half of itself: a scalar must not pin a large block that the next
        // large buffer then cannot use.
        if (auto it = free_.lower_bound(bytes); it != free_.end() && fits_well(it->first, bytes)) {
            BlockId id = it->second;
            free_.erase(it);
            return id;
        }
        BlockId id = blocks_.size();
        blocks_.emplace_back(bytes);
        held_ += blocks_[id].capacity();
        return id;
    }
    void release(BlockId id) { free_.emplace(blocks_[id].capacity(), id); }
    std::byte* data(BlockId id) const { return blocks_[id].data(); }

    // Bytes the pool holds: the peak that intermediate buffers have needed.
    std::size_t held_bytes() const { return held_; }
    std::size_t block_count() const { return blocks_.size(); }

private:
    static bool fits_well(std::size_t capacity, std::size_t bytes) {
        return capacity <= 2 * bytes || capacity - bytes <= 4 * AlignedBuffer::kAlign;
    }

    std::vector<AlignedBuffer> blocks_;
    std::multimap<std::size_t, BlockId> free_;
    std::size_t held_ = 0;
};

}  // namespace luminal::cpu

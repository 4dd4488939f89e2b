#pragma once
// Where a plan's results live in the CUDA runtime's arena. Lifetimes count in
// launches (plan.step), not nodes: the members of a launch group, or of a
// batched product, run at once, so no result one of them writes may take
// the memory of a result another reads. A batch's outputs are one block,
// each member's a whole aligned slot after the one before, so one cuBLASLt
// call writes them all at one stride.
#include <algorithm>
#include <span>
#include <vector>

#include "luminal/cuda/device_memory.hpp"
#include "luminal/cuda/plan.hpp"

namespace luminal::cuda {

struct ArenaLayout {
    std::vector<std::size_t> offsets;        // by node (results outside the arena: 0)
    std::vector<std::size_t> claim_offsets;  // by node: a scatter's claim table
    std::size_t bytes = 0;
};

inline std::size_t arena_slot(std::size_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// `result_bytes[n]`: node n's result in the arena (0: it lives elsewhere);
// `claim_bytes[n]`: a scatter's claim table (0: none).
inline ArenaLayout plan_arena_layout(const Plan& plan, std::span<const std::size_t> result_bytes, std::span<const std::size_t> claim_bytes) {
    const std::size_t n = plan.nodes.size();
    std::vector<ArenaRequest> requests;
    std::vector<std::size_t> claim_request(n, 0);
    for (std::uint32_t id = 0; id < n; ++id) {
        const std::uint32_t leader = plan.batch.empty() ? kNoBatch : plan.batch[id];
        std::size_t bytes = result_bytes[id];
        std::uint32_t last = plan.last_step[id];
        if (leader == id) {
            const std::vector<std::uint32_t> members = batch_members(plan.batch, id);
            bytes = 0;
            for (std::uint32_t m : members) {
                bytes += arena_slot(result_bytes[m]);
                last = std::max(last, plan.last_step[m]);
            }
        } else if (leader != kNoBatch) {
            bytes = 0;
        }
        requests.push_back({bytes, plan.step[id], bytes ? last : plan.step[id]});
    }
    for (std::uint32_t id = 0; id < n; ++id)
        if (claim_bytes[id] > 0) {
            claim_request[id] = requests.size();
            requests.push_back({claim_bytes[id], plan.step[id], plan.step[id]});
        }
    const ArenaPlan placed = plan_arena(requests);
    ArenaLayout layout;
    layout.bytes = placed.bytes;
    layout.offsets.assign(placed.offsets.begin(), placed.offsets.begin() + static_cast<std::ptrdiff_t>(n));
    layout.claim_offsets.assign(n, 0);
    for (std::uint32_t id = 0; id < n; ++id)
        if (claim_bytes[id] > 0) layout.claim_offsets[id] = placed.offsets[claim_request[id]];
    for (std::uint32_t id = 0; id < n; ++id)
        if (!plan.batch.empty() && plan.batch[id] == id) {
            std::size_t at = layout.offsets[id];
            for (std::uint32_t m : batch_members(plan.batch, id)) {
                layout.offsets[m] = at;
                at += arena_slot(result_bytes[m]);
            }
        }
    return layout;
}

}  // namespace luminal::cuda

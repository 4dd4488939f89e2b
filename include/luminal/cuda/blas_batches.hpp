#pragma once
// Products of one activation by several weight matrices of one shape (k and
// v, gate and up) run as one cuBLASLt call: a strided batch whose A is the
// activation for every member (batch stride 0), whose B walks the weights
// (the runtime places a batch's weight inputs side by side in one block, so
// they are a constant stride apart) and whose outputs are side by side in the
// arena. One launch instead of several, and one set of waves over all the
// members' tiles, so small products share the SMs.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "luminal/cuda/blas_matmul_op.hpp"
#include "luminal/graph/program.hpp"

namespace luminal::cuda {

inline constexpr std::size_t kMaxBatchMembers = 8;
inline constexpr std::size_t kPlacementAlignment = 256;  // a member's weights and output start as an allocation would

// Bytes of an input of static shape, 0 when a dim sizes it.
inline std::size_t static_input_bytes(const NodeSpec& spec) {
    std::size_t n = size_of(spec.dtype);
    for (const Expression& d : spec.shape) {
        const auto c = d.as_constant();
        if (!c || *c < 0) return 0;
        n *= static_cast<std::size_t>(*c);
    }
    return n;
}

namespace batch_detail {

// Node n multiplies by a bound weight matrix that may be placed beside others: a plain cuBLASLt product (no
// addend, one matrix each side at every size) whose B is an Input of static shape, read whole, not carried.
template <typename IsCarried>
bool batchable(const std::vector<ProgramNode>& nodes, std::uint32_t n, IsCarried is_carried) {
    const NodeSpec& spec = nodes[n].spec;
    const auto* blas = spec.payload_as<BlasMatmulOp>();
    if (!blas || blas->adds_addend || nodes[n].sources.size() != 2) return false;
    const std::uint32_t weights = nodes[n].sources[1];
    const NodeSpec& w = nodes[weights].spec;
    const std::size_t bytes = static_input_bytes(w);
    return w.kind == symbol_of(OpKind::Input) && !w.op.payload && !is_carried(weights) && bytes > 0 &&
           bytes % kPlacementAlignment == 0 && spec.views[1].is_contiguous() &&
           static_cast<std::size_t>(product(spec.views[1].dims()).as_constant().value_or(0)) * size_of(w.dtype) == bytes &&
           blas_accepts_always(spec.views[0]) && blas_accepts_always(spec.views[1]);
}

// Whether node m's product can join node n's batch: the same activation, read the same way, by weights of the same form.
inline bool same_batch(const std::vector<ProgramNode>& nodes, std::uint32_t n, std::uint32_t m) {
    const ProgramNode &a = nodes[n], &b = nodes[m];
    const NodeSpec &wa = nodes[a.sources[1]].spec, &wb = nodes[b.sources[1]].spec;
    return a.sources[0] == b.sources[0] && a.sources[1] != b.sources[1] && a.spec.views == b.spec.views && a.spec.shape == b.spec.shape &&
           a.spec.dtype == b.spec.dtype && wa.dtype == wb.dtype && wa.shape == wb.shape;
}

}  // namespace batch_detail

// The batch each node leads or joins (its leader's index; kNoBatch: none):
// the products of one activation by weights of one form, wherever they stand
// (a batch runs where its leader would, its other products earlier than
// they stood, which their sources allow: the activation comes before the
// leader, the weights are bound).
inline constexpr std::uint32_t kNoBatch = ~std::uint32_t{0};

template <typename IsCarried>
std::vector<std::uint32_t> blas_batches(const std::vector<ProgramNode>& nodes, IsCarried is_carried) {
    std::vector<std::uint32_t> leader(nodes.size(), kNoBatch);
    std::map<std::uint32_t, std::vector<std::vector<std::uint32_t>>> by_activation;
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
        if (!batch_detail::batchable(nodes, n, is_carried)) continue;
        auto& batches = by_activation[nodes[n].sources[0]];
        auto joins = std::find_if(batches.begin(), batches.end(), [&](const std::vector<std::uint32_t>& b) {
            return b.size() < kMaxBatchMembers && batch_detail::same_batch(nodes, b.front(), n);
        });
        if (joins == batches.end()) batches.push_back({n});
        else joins->push_back(n);
    }
    for (const auto& [activation, batches] : by_activation)
        for (const std::vector<std::uint32_t>& b : batches)
            if (b.size() > 1)
                for (std::uint32_t m : b) leader[m] = b.front();
    return leader;
}

// The members of the batch `leader` leads, in order.
inline std::vector<std::uint32_t> batch_members(const std::vector<std::uint32_t>& batch, std::uint32_t leader) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t n = leader; n < batch.size(); ++n)
        if (batch[n] == leader) out.push_back(n);
    return out;
}

// The one cuBLASLt call of a batch: the leader's operands with the batch
// walking the weights `weights_stride` elements apart and the outputs
// `out_stride` elements apart, the activation shared (stride 0).
struct BatchedBlasCall {
    BlasOperand a, b;
    std::int64_t batch = 1, out_stride = 0;
};

inline BatchedBlasCall batched_blas_call(const BlasOperand& a, const BlasOperand& b, std::int64_t members, std::int64_t weights_stride,
                                         std::int64_t out_stride) {
    check(a.batch == 1 && b.batch == 1, "cuda batch", "a batched product's members are single matrices (got batches {} and {})", a.batch,
          b.batch);
    BatchedBlasCall call{a, b, members, out_stride};
    call.a.batch = call.b.batch = members;
    call.a.batch_stride = 0;
    call.b.batch_stride = weights_stride;
    return call;
}

}  // namespace luminal::cuda

#pragma once
// The CPU runtime's prices for extraction: node_seconds' estimate from three
// numbers (one core at about 10 GB/s; a GEMM does ~16 flops per byte streamed),
// except that elementwise arithmetic is priced at the rate the fused kernel's
// lane loops reach, far below a GEMM's: a sin there costs nanoseconds. So a
// region that recomputes a transcendental for every element of a broadcast (a
// rotary table read by every head) is priced at what that costs, and computing it
// once at its own size wins where it should.
#include <span>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/lowering/fused_elementwise.hpp"

namespace luminal::cpu {

inline constexpr double kElementwiseFlopsPerSecond = 8e9;

// The arithmetic node_seconds prices at a GEMM's rate, when the node is elementwise.
inline double elementwise_flops_of(const NodeCostQuery& q) {
    const NodeSpec& s = q.spec;
    if (const auto* fused = s.payload_as<FusedElementwiseOp>())
        return fused->flops(OpCostQuery{s.views, s.shape, s.dtype, q.dims});
    if (s.op.payload || !(is_unary(s.op.kind) || is_binary(s.op.kind))) return 0;
    double elements = 1;
    for (const Expression& d : s.shape) elements *= static_cast<double>(std::max<std::int64_t>(d.eval(q.dims), 0));
    return elements * elementwise_flops(s.op.kind);
}

inline CostModel cost_model() {
    const CostModel gemm_rate{1e10, 4.096e-7, 1.6e11};
    CostModel model = gemm_rate;
    model.price = [gemm_rate](const NodeCostQuery& q, std::span<const DynMap> dims, std::span<double> seconds) {
        for (std::size_t d = 0; d < dims.size(); ++d) {
            const NodeCostQuery at{q.spec, q.input_dtypes, q.input_shapes, q.input_bound, dims[d]};
            seconds[d] = node_seconds(at, gemm_rate) +
                         elementwise_flops_of(at) * (1 / kElementwiseFlopsPerSecond - 1 / gemm_rate.flops_per_second);
        }
    };
    return model;
}

}  // namespace luminal::cpu

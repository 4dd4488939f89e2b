#pragma once
// cuda.WriteAt: input 0 with `count` of its elements replaced: element z of
// the body (over the other inputs; its loads carry their views) lands at the
// position the body's step `position` computes for z, distinct for distinct
// z. A KV cache write of the new rows (a Scatter at positions p * row + z, or
// at a cache length read from a tensor): one pass, no claim table, and in
// place when the cache is carried.
#include <string_view>

#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/graph/backend_op.hpp"

namespace luminal::cuda {

struct WriteAtOp {
    static constexpr std::string_view name = "cuda.WriteAt";
    Body body;
    std::uint16_t position = 0;
    Expression count;

    bool operator==(const WriteAtOp&) const = default;
    std::size_t hash() const { return body.hash() ^ std::size_t{position} * 31 ^ count.hash() * 0x9E3779B97F4A7C15ull; }
    std::string attributes() const { return fmt::format("{} elements, steps={}", count, body.steps.size()); }
    double flops(const OpCostQuery& q) const {
        return static_cast<double>(count.eval(q.dims)) * static_cast<double>(body.steps.size());
    }

    void reference(const ReferenceCall& call) const {
        std::vector<HostBuffer> buffers;
        for (const ReferenceInput& in : call.inputs) {
            HostBuffer b(in.dtype(), static_cast<std::size_t>(in.numel()));
            for (std::int64_t e = 0; e < in.numel(); ++e) in.copy_to(b, static_cast<std::size_t>(e), e);
            buffers.push_back(std::move(b));
        }
        for (std::size_t e = 0; e < call.out.size(); ++e) call.out.copy_element(e, buffers[0], e);
        std::vector<const HostBuffer*> inputs;
        for (const HostBuffer& b : buffers) inputs.push_back(&b);
        const KernelBuffers kb{inputs, call.out, call.dims};
        interpreter_detail::BodyRunner runner(body, call.node, kb);
        const std::int64_t n = count.eval(call.dims), size = static_cast<std::int64_t>(call.out.size());
        for (std::int64_t z = 0; z < n; ++z) {
            runner.run(z);
            const std::int64_t to = runner.value(position).as_int(0);
            check(to >= 0 && to < size, "Scatter", "node {}: index {} at position {} is out of range for {} elements", call.node, to,
                  z, size);
            call.out.copy_element(static_cast<std::size_t>(to), runner.result(), 0);
        }
    }
};

}  // namespace luminal::cuda

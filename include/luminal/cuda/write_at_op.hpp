#pragma once
// cuda.WriteAt: input 0 with `count` of its elements replaced: element z of
// the body (over the other inputs; its loads carry their views) lands at
// position at(z), distinct for distinct z. A KV cache write of the new rows
// (a Scatter at positions p * row + z): one pass, no claim table, and in
// place when the cache is carried.
#include <string_view>

#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/graph/backend_op.hpp"

namespace luminal::cuda {

struct WriteAtOp {
    static constexpr std::string_view name = "cuda.WriteAt";
    Body body;
    Expression at, count;

    bool operator==(const WriteAtOp&) const = default;
    std::size_t hash() const { return body.hash() ^ at.hash() * 31 ^ count.hash() * 0x9E3779B97F4A7C15ull; }
    std::string attributes() const { return fmt::format("{} elements at {}, steps={}", count, at, body.steps.size()); }
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
        const Expression position = at.bind(call.dims);
        const std::int64_t n = count.eval(call.dims), size = static_cast<std::int64_t>(call.out.size());
        for (std::int64_t z = 0; z < n; ++z) {
            const std::int64_t to = position.eval(call.dims, z);
            check(to >= 0 && to < size, "Scatter", "node {}: index {} at position {} is out of range for {} elements", call.node, to,
                  z, size);
            runner.run(z);
            call.out.copy_element(static_cast<std::size_t>(to), runner.result(), 0);
        }
    }
};

}  // namespace luminal::cuda

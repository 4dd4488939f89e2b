#pragma once
// cuda.Region: an elementwise result computed by a kernel IR body, whose
// loads may read an input at a position another step computed. It is what a
// fused region becomes when it absorbs a producer region it reads through a
// padded, sliced or broadcast view (the halves of RoPE's rotation and their
// concatenation): the producer's steps run at the position the view maps each
// element to, masked to 0 where the view reads padding. The node reads each
// input whole (its views are contiguous); the body's loads carry the views.
#include <string_view>

#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/graph/backend_op.hpp"
#include "luminal/runtime/host_buffer_io.hpp"

namespace luminal::cuda {

struct RegionOp {
    static constexpr std::string_view name = "cuda.Region";
    Body body;

    bool operator==(const RegionOp&) const = default;
    std::size_t hash() const { return body.hash(); }
    std::string attributes() const { return fmt::format("steps={}", body.steps.size()); }
    DType dtype(std::span<const DType>) const { return body.steps.back().dtype; }
    double flops(const OpCostQuery& q) const { return q.elements(q.shape) * static_cast<double>(body.steps.size()); }

    // The body at every element, as the kernel interpreter runs it.
    void reference(const ReferenceCall& call) const {
        std::vector<HostBuffer> buffers;
        for (const ReferenceInput& in : call.inputs) {
            HostBuffer b(in.dtype(), static_cast<std::size_t>(in.numel()));
            for (std::int64_t e = 0; e < in.numel(); ++e) in.copy_to(b, static_cast<std::size_t>(e), e);
            buffers.push_back(std::move(b));
        }
        std::vector<const HostBuffer*> inputs;
        for (const HostBuffer& b : buffers) inputs.push_back(&b);
        const KernelBuffers kb{inputs, call.out, call.dims};
        interpreter_detail::BodyRunner runner(body, call.node, kb);
        for (std::size_t z = 0; z < call.out.size(); ++z) {
            runner.run(static_cast<std::int64_t>(z));
            call.out.copy_element(z, runner.result(), 0);
        }
    }
};

}  // namespace luminal::cuda

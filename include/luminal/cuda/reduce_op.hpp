#pragma once
// cuda.Reduce: SumReduce / MaxReduce with the way its kernel spreads the fold
// over threads (a thread, a warp or a block per output) as an attribute, so
// the CUDA rules can offer each as an alternative and the search profiles
// them; and optionally a prologue, a fused elementwise program computing each
// element folded from the node's inputs (so sum(x * x) reads x once and
// writes no x * x). The plain primitives run one thread per output.
#include <memory>
#include <string>
#include <string_view>

#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/graph/backend_op.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/runtime/reference_reduce.hpp"

namespace luminal::cuda {

struct ReduceOp {
    static constexpr std::string_view name = "cuda.Reduce";
    OpKind fold = OpKind::SumReduce;
    std::size_t axis = 0;
    ReduceStrategy strategy = ReduceStrategy::WarpPerOutput;
    std::shared_ptr<const FusedProgram> prologue;  // null: the fold reads input 0

    bool operator==(const ReduceOp& o) const {
        return fold == o.fold && axis == o.axis && strategy == o.strategy &&
               (prologue == o.prologue || (prologue && o.prologue && *prologue == *o.prologue));
    }
    std::size_t hash() const {
        std::size_t h = (static_cast<std::size_t>(fold) * 131 + axis) * 131 + static_cast<std::size_t>(strategy);
        if (prologue) h = h * 0x100000001B3ull ^ FusedElementwiseOp{prologue}.hash();
        return h;
    }
    std::string attributes() const {
        return fmt::format("{} axis={} {}{}", name_of(fold), axis, name_of(strategy),
                           prologue ? fmt::format(" prologue={}", prologue->steps.size()) : "");
    }
    // Every input is read with the folded tensor's dims.
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape out = inputs[0].dims();
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
        return out;
    }
    DType dtype(std::span<const DType> inputs) const { return prologue ? prologue->steps.back().dtype : inputs[0]; }
    double flops(const OpCostQuery& q) const {
        const double steps = prologue ? static_cast<double>(prologue->steps.size()) : 0;
        return q.elements(q.inputs[0].dims()) * (1 + steps);
    }
    void reference(const ReferenceCall& call) const {
        if (!prologue) {
            reference_fold(fold, call.inputs[0], axis, call.out);
            return;
        }
        const ShapeTracker folded = folded_view(call);
        HostBuffer elements(prologue->steps.back().dtype, static_cast<std::size_t>(folded.numel().eval(call.dims)));
        FusedElementwiseOp{prologue}.reference(ReferenceCall{call.inputs, elements, call.dims, call.node});
        reference_fold(fold, ReferenceInput(elements, folded, call.dims, call.node), axis, call.out);
    }

private:
    static ShapeTracker folded_view(const ReferenceCall& call) {
        Shape dims;
        for (std::size_t a = 0; a < call.inputs[0].rank(); ++a) dims.push_back(Expression(call.inputs[0].dim(a)));
        return ShapeTracker(dims);
    }
};

}  // namespace luminal::cuda

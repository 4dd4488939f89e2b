#pragma once
// Using an op declared as a type (graph/backend_op.hpp) from tensor code:
//
//   GraphTensor y = luminal::custom_op(Axpy{2.0}, {x, b});
//
// The node reads each input through its current view; its shape and dtype
// come from the op's rules. Saturation carries it through unchanged (rules may
// match it by op_symbol<Axpy>), and every runtime that runs the program must
// know the op: the ReferenceRuntime by its reference semantics, a backend by
// its own kernel (CpuRuntime::add_op<Axpy>()).
#include <vector>

#include "luminal/graph/ops_common.hpp"

namespace luminal {

template <BackendOpType T>
GraphTensor custom_op(T op, std::initializer_list<GraphTensor> inputs) {
    check(inputs.size() > 0, T::name.data(), "a custom op needs at least one input tensor");
    std::vector<ShapeTracker> views;
    std::vector<DType> dtypes;
    for (const GraphTensor& in : inputs) {
        views.push_back(in.view());
        dtypes.push_back(in.dtype());
    }
    Op node = Op::custom(std::move(op));
    Shape shape = node.payload->shape(views);
    DType dtype = node.payload->dtype(dtypes);
    return detail::make_node(std::move(node), inputs, std::move(shape), dtype);
}

}  // namespace luminal

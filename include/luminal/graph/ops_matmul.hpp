#pragma once
// torch.matmul for 1-D to 4-D operands (any rank works): both operands are
// broadcast to [..., m, n, k], multiplied, and summed over k. Backends
// recognise this expand-mul-sum pattern and run it as a GEMM.
#include "luminal/graph/ops_common.hpp"
#include "luminal/graph/ops_reduce.hpp"

namespace luminal::ops {

inline GraphTensor matmul(const GraphTensor& a, const GraphTensor& b) {
    detail::check_same_graph(a, b, "matmul");
    check(a.rank() >= 1 && b.rank() >= 1, "matmul", "operands must have rank >= 1, got {} and {}",
          to_string(a.shape()), to_string(b.shape()));
    bool vector_a = a.rank() == 1, vector_b = b.rank() == 1;
    GraphTensor x = vector_a ? a.unsqueeze(0) : a;   // [.., m, k]
    GraphTensor y = vector_b ? b.unsqueeze(-1) : b;  // [.., k, n]
    // Inner sizes equal only for some values of the dims are guarded, as broadcasting is.
    Expression k = detail::equal_size(x.graph(), x.view().dim(x.rank() - 1), y.view().dim(y.rank() - 2), "matmul", [&] {
        return fmt::format("inner dimensions differ: {} @ {} ({} vs {})", to_string(a.shape()), to_string(b.shape()),
                           x.view().dim(x.rank() - 1), y.view().dim(y.rank() - 2));
    });
    Shape shape_x = x.shape(), shape_y = y.shape();
    Shape batch_x(shape_x.begin(), shape_x.end() - 2), batch_y(shape_y.begin(), shape_y.end() - 2);
    Shape batch = detail::broadcast_shape(x.graph(), batch_x, batch_y, "matmul");
    Expression m = x.view().dim(x.rank() - 2), n = y.view().dim(y.rank() - 1);
    Shape full = batch;
    full.insert(full.end(), {m, n, k});
    GraphTensor lhs = detail::broadcast_to(x.unsqueeze(-2), full, "matmul");                  // [.., m, 1, k]
    GraphTensor rhs = detail::broadcast_to(y.transpose(-1, -2).unsqueeze(-3), full, "matmul");  // [.., 1, n, k]
    // Integer matmuls keep their dtype (unlike sum, which widens to i64), as in torch.
    GraphTensor out = detail::reduce(OpKind::SumReduce, lhs * rhs, {-1}, false, "matmul");
    if (vector_a) out = out.squeeze(-2);
    if (vector_b) out = out.squeeze(-1);
    return out;
}

}  // namespace luminal::ops

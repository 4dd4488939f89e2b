#pragma once
// Matmul: a batched GEMM, out[.., i, j] = sum over k of a[.., i, k] * b[.., j, k]
// (b is read transposed). A backend-neutral LLIR op: the rule that finds it in
// expand . mul . sum_reduce is in lowering/rules.hpp, and each backend that
// takes those rules runs it with its own kernel.
#include <string_view>

#include "luminal/graph/backend_op.hpp"

namespace luminal {

struct MatmulOp {
    static constexpr std::string_view name = "Matmul";
    bool operator==(const MatmulOp&) const = default;
    std::size_t hash() const { return 0; }

    // [.., m, k] x [.., n, k] -> [.., m, n]
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape out = inputs[0].dims();
        out.back() = inputs[1].dims()[inputs[1].rank() - 2];
        return out;
    }
    double flops(const OpCostQuery& q) const {
        const Shape a = q.inputs[0].dims();
        return 2 * q.elements(q.shape) * static_cast<double>(std::max<std::int64_t>(a.back().eval(q.dims), 0));
    }

    // Accumulated in double (floats) or wrapping int64, then rounded once.
    void reference(const ReferenceCall& call) const {
        const ReferenceInput &a = call.inputs[0], &b = call.inputs[1];
        const std::size_t r = a.rank();
        const std::int64_t m = a.dim(r - 2), k = a.dim(r - 1), n = b.dim(r - 2);
        const std::int64_t batches = m * n == 0 ? 0 : static_cast<std::int64_t>(call.out.size()) / (m * n);
        const bool floats = is_float(a.dtype());
        for (std::int64_t batch = 0; batch < batches; ++batch)
            for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t j = 0; j < n; ++j) {
                    double acc = 0;
                    std::int64_t iacc = 0;
                    for (std::int64_t e = 0; e < k; ++e) {
                        const std::int64_t ai = (batch * m + i) * k + e, bi = (batch * n + j) * k + e;
                        if (floats) acc += a.f(ai) * b.f(bi);
                        else iacc = static_cast<std::int64_t>(static_cast<std::uint64_t>(iacc) +
                                                              static_cast<std::uint64_t>(a.i(ai)) * static_cast<std::uint64_t>(b.i(bi)));
                    }
                    const auto o = static_cast<std::size_t>((batch * m + i) * n + j);
                    if (floats) call.out.store_double(o, acc);
                    else call.out.store_int(o, iacc);
                }
    }
};

}  // namespace luminal

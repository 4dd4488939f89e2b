#pragma once
// The reference semantics of SumReduce and MaxReduce, shared by the
// ReferenceRuntime and by backend ops that are reductions in another form:
// out[o] folds in[(o / inner) * extent * inner + r * inner + o % inner] over
// r < extent, in double (floats; NaN wins a max) or wrapping int64.
#include <cmath>
#include <limits>

#include "luminal/graph/backend_op.hpp"
#include "luminal/graph/op.hpp"

namespace luminal {

inline void reference_fold(OpKind kind, const ReferenceInput& in, std::size_t axis, HostBuffer& out) {
    std::int64_t extent = in.dim(axis), inner = 1;
    for (std::size_t a = axis + 1; a < in.rank(); ++a) inner *= in.dim(a);
    const bool floats = is_float(in.dtype()), sum = kind == OpKind::SumReduce;
    for (std::size_t o = 0; o < out.size(); ++o) {
        auto oi = static_cast<std::int64_t>(o);
        std::int64_t first = (oi / inner) * extent * inner + oi % inner;
        if (floats) {
            double acc = sum ? 0.0 : -std::numeric_limits<double>::infinity();
            for (std::int64_t r = 0; r < extent; ++r) {
                double v = in.f(first + r * inner);
                acc = sum ? acc + v : (std::isnan(v) || std::isnan(acc) ? std::nan("") : std::max(acc, v));
            }
            out.store_double(o, acc);
        } else {
            std::int64_t acc = sum ? 0 : std::numeric_limits<std::int64_t>::min();
            if (!sum && out.dtype == DType::I32) acc = std::numeric_limits<std::int32_t>::min();
            if (!sum && (out.dtype == DType::U8 || out.dtype == DType::Bool)) acc = 0;
            for (std::int64_t r = 0; r < extent; ++r) {
                std::int64_t v = in.i(first + r * inner);
                acc = sum ? static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v))
                          : std::max(acc, v);
            }
            out.store_int(o, acc);
        }
    }
}

}  // namespace luminal

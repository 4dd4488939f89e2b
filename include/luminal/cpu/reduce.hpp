#pragma once
// SumReduce / MaxReduce on the CPU. The input view splits into outer axes,
// the reduced axis and inner axes; outer and inner axes are merged where
// memory allows, leaving two loops: one accumulator per output when the
// reduced axis is innermost (split over eight partial sums so it vectorises),
// or a row of accumulators swept along the reduced axis otherwise. Views
// with padding, or inner axes that do not merge into one, are first copied
// into a contiguous lane buffer, which always takes the fast path.
//
// Float inputs accumulate in float (the reference uses double, so long sums
// may differ in the last bits); integers accumulate in wrapping int64, as the
// reference does. MaxReduce propagates NaN; an empty max is -inf for floats
// and the output type's minimum for integers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "luminal/cpu/view.hpp"

namespace luminal::cpu {

struct ReduceScratch {
    std::vector<float> floats;            // materialised input (float lanes)
    std::vector<std::int64_t> ints;       // materialised input (int lanes)
    std::vector<float> acc_f;             // accumulators
    std::vector<std::int64_t> acc_i;
};

namespace reduce_detail {

constexpr std::int64_t kChunk = 1024;

template <bool Sum, typename L>
inline L identity(DType out_dtype) {
    if constexpr (std::is_same_v<L, float>) return Sum ? 0.0f : -std::numeric_limits<float>::infinity();
    else {
        if (Sum) return 0;
        if (out_dtype == DType::I32) return std::numeric_limits<std::int32_t>::min();
        if (out_dtype == DType::U8 || out_dtype == DType::Bool) return 0;
        return std::numeric_limits<std::int64_t>::min();
    }
}

template <bool Sum, typename L>
inline L combine(L acc, L v) {
    if constexpr (Sum) {
        if constexpr (std::is_same_v<L, float>) return acc + v;
        else return static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v));
    } else {
        if constexpr (std::is_same_v<L, float>) return (v > acc || v != v) ? v : acc;  // NaN sticks
        else return v > acc ? v : acc;
    }
}

// The reduction over simple (unpadded, merged) axes of a buffer of dtype D.
template <DType D, bool Sum>
void reduce_simple(const storage_t<D>* src, std::int64_t base, const std::vector<StridedAxis>& outer,
                   const StridedAxis& red, std::int64_t inner, std::int64_t inner_stride, DType out_dtype,
                   std::byte* out, ReduceScratch& scratch) {
    using L = lane_t<D>;
    std::vector<L>& acc = [&]() -> std::vector<L>& {
        if constexpr (std::is_same_v<L, float>) return scratch.acc_f;
        else return scratch.acc_i;
    }();
    acc.resize(kChunk);
    const L init = identity<Sum, L>(out_dtype);
    const std::int64_t extent = red.size, rs = red.stride;
    std::int64_t outer_count = 1;
    for (auto& a : outer) outer_count *= a.size;
    std::vector<std::int64_t> c(outer.size(), 0);

    std::int64_t pending = 0, pending_start = 0;  // inner == 1: results buffered, stored per chunk
    for (std::int64_t o = 0; o < outer_count; ++o) {
        std::int64_t row = base;
        for (std::size_t i = 0; i < outer.size(); ++i) row += c[i] * outer[i].stride;
        if (inner == 1) {
            L a = init;
            const storage_t<D>* p = src + row;
            if constexpr (Sum && D == DType::F32) {
                if (rs == 1) {
                    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    std::int64_t r = 0;
                    for (; r + 8 <= extent; r += 8)
                        for (int k = 0; k < 8; ++k) part[k] += p[r + k];
                    for (; r < extent; ++r) part[0] += p[r];
                    a = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
                } else {
                    for (std::int64_t r = 0; r < extent; ++r) a += p[r * rs];
                }
            } else {
                for (std::int64_t r = 0; r < extent; ++r) a = combine<Sum>(a, to_lane<D>(p[r * rs]));
            }
            acc[pending++] = a;
            if (pending == kChunk) {
                store_lanes(out_dtype, acc.data(), pending, out, pending_start);
                pending_start += pending;
                pending = 0;
            }
        } else {
            for (std::int64_t j0 = 0; j0 < inner; j0 += kChunk) {
                std::int64_t len = std::min(kChunk, inner - j0);
                std::fill(acc.begin(), acc.begin() + len, init);
                L* ac = acc.data();
                for (std::int64_t r = 0; r < extent; ++r) {
                    const storage_t<D>* p = src + row + r * rs + j0 * inner_stride;
                    if (inner_stride == 1)
                        for (std::int64_t j = 0; j < len; ++j) ac[j] = combine<Sum>(ac[j], to_lane<D>(p[j]));
                    else
                        for (std::int64_t j = 0; j < len; ++j)
                            ac[j] = combine<Sum>(ac[j], to_lane<D>(p[j * inner_stride]));
                }
                store_lanes(out_dtype, ac, len, out, o * inner + j0);
            }
        }
        for (std::size_t i = outer.size(); i-- > 0;) {
            if (++c[i] < outer[i].size) break;
            c[i] = 0;
        }
    }
    if (pending) store_lanes(out_dtype, acc.data(), pending, out, pending_start);
}

inline std::vector<StridedAxis> contiguous_axes(const std::vector<StridedAxis>& like) {
    std::vector<StridedAxis> out(like.size());
    std::int64_t stride = 1;
    for (std::size_t i = like.size(); i-- > 0;) {
        out[i] = StridedAxis{like[i].size, stride, 0, 0, like[i].size, false};
        stride *= like[i].size;
    }
    return out;
}

}  // namespace reduce_detail

// out (n elements of out_dtype) = reduction of `view` over `axis`, reading a
// buffer of dtype in_dtype.
inline void reduce(OpKind kind, std::size_t axis, DType in_dtype, const std::byte* src, const ShapeTracker& view,
                   const DynMap& dims, DType out_dtype, std::byte* out, ReduceScratch& scratch) {
    using namespace reduce_detail;
    BoundAxes bound(view, dims);
    std::vector<StridedAxis> axes = bound.axes;
    std::int64_t base = bound.base;
    DType dtype = in_dtype;
    const std::byte* data = src;

    auto split = [&](std::vector<StridedAxis>& outer, std::vector<StridedAxis>& inner) {
        outer = simplify_axes({axes.begin(), axes.begin() + static_cast<std::ptrdiff_t>(axis)});
        inner = simplify_axes({axes.begin() + static_cast<std::ptrdiff_t>(axis) + 1, axes.end()});
    };
    std::vector<StridedAxis> outer, inner;
    split(outer, inner);
    if (bound.padded || inner.size() > 1) {
        // Copy the logical input out contiguously; the copy is always simple.
        StridedView whole(view, dims);
        std::int64_t n = whole.numel();
        if (is_float(in_dtype)) {
            scratch.floats.resize(static_cast<std::size_t>(n));
            load_view(in_dtype, src, whole, 0, n, scratch.floats.data());
            data = reinterpret_cast<const std::byte*>(scratch.floats.data());
            dtype = DType::F32;
        } else {
            scratch.ints.resize(static_cast<std::size_t>(n));
            load_view(in_dtype, src, whole, 0, n, scratch.ints.data());
            data = reinterpret_cast<const std::byte*>(scratch.ints.data());
            dtype = DType::I64;
        }
        axes = contiguous_axes(axes);
        base = 0;
        split(outer, inner);
    }
    std::int64_t inner_size = inner.empty() ? 1 : inner[0].size;
    std::int64_t inner_stride = inner.empty() ? 0 : inner[0].stride;
    bool sum = kind == OpKind::SumReduce;
    visit_dtype(dtype, [&]<DType D>(DTypeTag<D>) {
        auto* typed = reinterpret_cast<const storage_t<D>*>(data);
        if (sum) reduce_simple<D, true>(typed, base, outer, axes[axis], inner_size, inner_stride, out_dtype, out, scratch);
        else reduce_simple<D, false>(typed, base, outer, axes[axis], inner_size, inner_stride, out_dtype, out, scratch);
    });
}

}  // namespace luminal::cpu

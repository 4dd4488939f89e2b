#pragma once
// Argsort: the order of each row of its input along the last axis, as
// ops::argsort defines it (torch.argsort(stable=True)): out[r, j] is the
// position of the j-th value of row r, smallest first (largest first when
// `descending`), equal values in their original order, NaN larger than
// everything and equal to itself, -0 equal to +0. The input is read through
// its view as [..., n]; the output is i32 [..., n] in element order.
//
// ops::argsort records it as a rank count over all pairs of a row (n^2
// comparisons, then a scatter of each position to its rank), which every
// backend can run; lowering/argsort_rules.hpp finds that composition, and a
// backend runs this op as a sort (n log n). topk_indexes is its first k.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/cpu/op.hpp"
#include "luminal/graph/backend_op.hpp"

namespace luminal {

namespace argsort_detail {

// A key whose integer order is the sort's order of floats: NaN just above
// +inf, -0 = +0. Every key fits in 32 bits.
inline std::int64_t float_key(float v) {
    constexpr std::int64_t kNanKey = 0x7f800001;
    if (std::isnan(v)) return kNanKey;
    const auto bits = std::bit_cast<std::int32_t>(v);
    return bits < 0 ? -static_cast<std::int64_t>(bits & 0x7fffffff) : bits;
}

// Writes the order of `keys` to `order` (its positions, as i32). Keys that
// fit in 32 bits sort as one integer each with the position in its low half,
// which is what makes equal keys keep their order.
inline void sort_row(std::span<const std::int64_t> keys, bool descending, std::span<std::int32_t> order,
                     std::vector<std::uint64_t>& scratch) {
    const std::size_t n = keys.size();
    const bool narrow = std::all_of(keys.begin(), keys.end(), [](std::int64_t k) {
        return k > std::numeric_limits<std::int32_t>::min() && k <= std::numeric_limits<std::int32_t>::max();
    });
    if (narrow) {
        scratch.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto k = static_cast<std::int32_t>(descending ? -keys[i] : keys[i]);
            scratch[i] = (std::uint64_t{static_cast<std::uint32_t>(k) ^ 0x80000000u} << 32) | i;
        }
        std::sort(scratch.begin(), scratch.end());
        for (std::size_t j = 0; j < n; ++j) order[j] = static_cast<std::int32_t>(scratch[j] & 0xffffffffu);
        return;
    }
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::int32_t>(i);
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        const std::int64_t ka = keys[static_cast<std::size_t>(a)], kb = keys[static_cast<std::size_t>(b)];
        if (ka != kb) return descending ? ka > kb : ka < kb;
        return a < b;
    });
}

}  // namespace argsort_detail

struct ArgsortOp {
    static constexpr std::string_view name = "Argsort";
    bool descending = false;

    bool operator==(const ArgsortOp&) const = default;
    std::size_t hash() const { return descending ? 0x4172677344u : 0x41726773u; }
    std::string attributes() const { return descending ? "descending" : "ascending"; }
    DType dtype(std::span<const DType>) const { return DType::I32; }
    double flops(const OpCostQuery& q) const {
        const double n = static_cast<double>(std::max<std::int64_t>(q.shape.back().eval(q.dims), 1));
        return q.elements(q.shape) * std::max(std::log2(n), 1.0);
    }

    void reference(const ReferenceCall& call) const {
        const ReferenceInput& x = call.inputs[0];
        check(x.rank() > 0, name.data(), "node {}: needs an axis to sort along", call.node);
        const std::int64_t n = x.dim(x.rank() - 1), rows = n > 0 ? x.numel() / n : 0;
        std::vector<std::int64_t> keys(static_cast<std::size_t>(n));
        std::vector<std::int32_t> order(static_cast<std::size_t>(n));
        std::vector<std::uint64_t> scratch;
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t i = 0; i < n; ++i)
                keys[i] = is_float(x.dtype()) ? argsort_detail::float_key(static_cast<float>(x.f(r * n + i))) : x.i(r * n + i);
            argsort_detail::sort_row(keys, descending, order, scratch);
            for (std::int64_t j = 0; j < n; ++j) call.out.store_int(static_cast<std::size_t>(r * n + j), order[j]);
        }
    }

    void cpu(const CpuOpCall& call) const {
        const CpuTensor& x = call.inputs[0];
        check(!x.dims.empty(), name.data(), "needs an axis to sort along");
        const std::int64_t n = x.dims.back(), rows = n > 0 ? x.numel() / n : 0;
        std::vector<std::int64_t> keys(static_cast<std::size_t>(n));
        std::vector<std::uint64_t> scratch;
        auto* out = call.out.as<std::int32_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t i = 0; i < n; ++i) keys[i] = key(x, r * n + i);
            argsort_detail::sort_row(keys, descending, std::span(out + r * n, static_cast<std::size_t>(n)), scratch);
        }
    }

private:
    static std::int64_t key(const CpuTensor& x, std::int64_t at) {
        switch (x.dtype) {
            case DType::F32: return argsort_detail::float_key(x.as<float>()[at]);
            case DType::F16: return argsort_detail::float_key(f16_bits_to_f32(x.as<std::uint16_t>()[at]));
            case DType::BF16: return argsort_detail::float_key(bf16_bits_to_f32(x.as<std::uint16_t>()[at]));
            case DType::I32: return x.as<std::int32_t>()[at];
            case DType::I64: return x.as<std::int64_t>()[at];
            case DType::U8: case DType::Bool: return x.as<std::uint8_t>()[at];
        }
        return 0;
    }
};

}  // namespace luminal

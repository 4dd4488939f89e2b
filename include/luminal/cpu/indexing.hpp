#pragma once
// Gather and Scatter on the CPU, with the flat semantics of op.hpp: data is
// read as a flat logical tensor through its view; Scatter copies dest, then
// writes src[i] to indexes[i] in order, so a repeated index keeps the last
// write. Indexes are loaded a block at a time; every one is bounds-checked
// (an out-of-range index is a user error, not a crash).
#include <cstdint>
#include <vector>

#include "luminal/cpu/view.hpp"

namespace luminal::cpu {

struct IndexScratch {
    std::vector<std::int64_t> indexes;
};

namespace indexing_detail {
constexpr std::int64_t kBlock = 256;
}

// A buffer of some dtype read through a bound view.
struct ViewedBuffer {
    DType dtype;
    const std::byte* data;
    const StridedView& view;
};

// out[i] = data[indexes[i]] for i < n (out has out_dtype).
inline void gather(const ViewedBuffer& data, const ViewedBuffer& indexes, DType out_dtype, std::byte* out,
                   std::int64_t n, std::uint32_t node, IndexScratch& scratch) {
    using indexing_detail::kBlock;
    scratch.indexes.resize(kBlock);
    std::int64_t* idx = scratch.indexes.data();
    visit_dtype(data.dtype, [&]<DType D>(DTypeTag<D>) {
        using L = lane_t<D>;
        auto* src = reinterpret_cast<const storage_t<D>*>(data.data);
        L values[kBlock];
        for (std::int64_t start = 0; start < n; start += kBlock) {
            std::int64_t len = std::min(kBlock, n - start);
            load_view(indexes.dtype, indexes.data, indexes.view, start, len, idx);
            for (std::int64_t j = 0; j < len; ++j) {
                std::int64_t at = idx[j];
                check(at >= 0 && at < data.view.numel(), "Gather",
                      "node {}: index {} at position {} is out of range for {} elements", node, at, start + j,
                      data.view.numel());
                std::int64_t p = data.view.locate(at);
                values[j] = p < 0 ? L(0) : to_lane<D>(src[p]);
            }
            store_lanes(out_dtype, values, len, out, start);
        }
    });
}

// out[indexes[i]] = src[i] in order, into out's n elements of out_dtype.
inline void scatter_into(const ViewedBuffer& indexes, const ViewedBuffer& src, DType out_dtype, std::byte* out,
                         std::int64_t n, std::uint32_t node, IndexScratch& scratch) {
    using indexing_detail::kBlock;
    scratch.indexes.resize(kBlock);
    std::int64_t* idx = scratch.indexes.data();
    const std::int64_t count = indexes.view.numel();
    check(src.view.numel() >= count, "Scatter", "node {}: {} indexes but only {} source elements", node, count,
          src.view.numel());
    visit_dtype(out_dtype, [&]<DType O>(DTypeTag<O>) {
        auto* o = reinterpret_cast<storage_t<O>*>(out);
        visit_dtype(src.dtype, [&]<DType S>(DTypeTag<S>) {
            lane_t<S> values[kBlock];
            for (std::int64_t start = 0; start < count; start += kBlock) {
                std::int64_t len = std::min(kBlock, count - start);
                load_view(indexes.dtype, indexes.data, indexes.view, start, len, idx);
                src.view.template load<S>(reinterpret_cast<const storage_t<S>*>(src.data), start, len, values);
                for (std::int64_t j = 0; j < len; ++j) {
                    std::int64_t at = idx[j];
                    check(at >= 0 && at < n, "Scatter", "node {}: index {} at position {} is out of range for {} elements",
                          node, at, start + j, n);
                    o[at] = write_as<O>(values[j]);
                }
            }
        });
    });
}

// out (n elements of out_dtype) = dest; then out[indexes[i]] = src[i] in order.
inline void scatter(const ViewedBuffer& dest, const ViewedBuffer& indexes, const ViewedBuffer& src, DType out_dtype,
                    std::byte* out, std::int64_t n, std::uint32_t node, IndexScratch& scratch) {
    using indexing_detail::kBlock;
    visit_dtype(dest.dtype, [&]<DType D>(DTypeTag<D>) {
        lane_t<D> values[kBlock];
        for (std::int64_t start = 0; start < n; start += kBlock) {
            std::int64_t len = std::min(kBlock, n - start);
            dest.view.template load<D>(reinterpret_cast<const storage_t<D>*>(dest.data), start, len, values);
            store_lanes(out_dtype, values, len, out, start);
        }
    });
    scatter_into(indexes, src, out_dtype, out, n, node, scratch);
}

}  // namespace luminal::cpu

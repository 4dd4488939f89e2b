#pragma once
// A view (ShapeTracker) bound to numbers and simplified for the CPU kernels:
// offsets of fully valid axes fold into the base, size-1 axes drop out and
// adjacent axes that walk memory in step merge. What is left is usually one
// of three shapes, each with its own loop: contiguous (position = base + i),
// a broadcast scalar (one position), or strided, walked with a
// multi-dimensional counter (one div/mod per block, not per element) and
// per-axis valid windows for padding.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "luminal/cpu/dtype.hpp"
#include "luminal/shape/shape_tracker.hpp"

namespace luminal::cpu {

struct StridedAxis {
    std::int64_t size, stride, offset, lo, hi;
    bool checked;  // has a valid window (padding or masking) to test
};

// Numeric axes of a view, in logical order, with offsets of fully valid axes
// folded into `base`. Nothing is dropped or merged: reductions and matmul
// need the axes as the graph wrote them.
struct BoundAxes {
    std::int64_t base = 0;
    std::vector<StridedAxis> axes;
    bool padded = false;

    BoundAxes(const ShapeTracker& view, const DynMap& dims) : base(view.base().eval(dims)) {
        for (auto& a : view.axes()) {
            StridedAxis x{a.size.eval(dims), a.stride.eval(dims), a.offset.eval(dims), a.valid_lo.eval(dims),
                          a.valid_hi.eval(dims), false};
            if (x.lo <= x.offset && x.offset + x.size <= x.hi) {
                base += x.offset * x.stride;
                x.offset = 0;
            } else {
                x.checked = true;
                padded = true;
            }
            axes.push_back(x);
        }
    }
};

// Drops unchecked size-1 axes and merges adjacent unchecked axes that step
// through memory as one (stride_i == stride_{i+1} * size_{i+1}).
inline std::vector<StridedAxis> simplify_axes(const std::vector<StridedAxis>& in) {
    std::vector<StridedAxis> out;
    for (const StridedAxis& a : in) {
        if (!a.checked && a.size == 1) continue;
        if (!out.empty() && !a.checked && !out.back().checked && out.back().stride == a.stride * a.size) {
            out.back().size *= a.size;
            out.back().stride = a.stride;
            out.back().hi = out.back().size;
            continue;
        }
        out.push_back(a);
    }
    for (StridedAxis& a : out)
        if (!a.checked) a.lo = 0, a.hi = a.size;
    return out;
}

class StridedView {
public:
    enum class Kind { Contiguous, Scalar, Strided };
    static constexpr std::size_t kMaxRank = 16;

    StridedView() = default;
    StridedView(const ShapeTracker& view, const DynMap& dims) {
        BoundAxes bound(view, dims);
        base_ = bound.base;
        for (auto& a : bound.axes) numel_ *= a.size;
        axes_ = simplify_axes(bound.axes);
        classify();
    }
    // A contiguous view of n elements starting at `base`.
    static StridedView contiguous(std::int64_t n, std::int64_t base = 0) {
        StridedView v;
        v.base_ = base;
        v.numel_ = n;
        if (n != 1) v.axes_.push_back({n, 1, 0, 0, n, false});
        v.classify();
        return v;
    }

    Kind kind() const { return kind_; }
    std::int64_t base() const { return base_; }
    std::int64_t numel() const { return numel_; }
    const std::vector<StridedAxis>& axes() const { return axes_; }

    // Buffer position of logical element `index`, or -1 where it is padding.
    std::int64_t locate(std::int64_t index) const {
        if (kind_ == Kind::Contiguous) return base_ + index;
        std::int64_t position = base_;
        for (std::size_t i = axes_.size(); i-- > 0;) {
            const StridedAxis& a = axes_[i];
            std::int64_t p = index % a.size + a.offset;
            index /= a.size;
            if (a.checked && (p < a.lo || p >= a.hi)) return -1;
            position += p * a.stride;
        }
        return position;
    }

    // Lowest and highest buffer positions any valid element reads; nullopt
    // when every element is padding (or there are none).
    std::optional<std::pair<std::int64_t, std::int64_t>> extent() const {
        if (numel_ == 0) return std::nullopt;
        std::int64_t lo = base_, hi = base_;
        for (const StridedAxis& a : axes_) {
            std::int64_t first = a.offset, last = a.offset + a.size - 1;
            if (a.checked) first = std::max(first, a.lo), last = std::min(last, a.hi - 1);
            if (first > last) return std::nullopt;
            std::int64_t x = first * a.stride, y = last * a.stride;
            lo += std::min(x, y);
            hi += std::max(x, y);
        }
        return std::pair{lo, hi};
    }

    // dst[j] = element start + j read as lane type L, for j < len (padding reads 0).
    template <DType D, typename L>
    void load(const storage_t<D>* src, std::int64_t start, std::int64_t len, L* dst) const {
        switch (kind_) {
            case Kind::Contiguous:
                for (std::int64_t j = 0; j < len; ++j) dst[j] = read_as<L, D>(src[base_ + start + j]);
                return;
            case Kind::Scalar:
                std::fill(dst, dst + len, read_as<L, D>(src[base_]));
                return;
            case Kind::Strided:
                if (axes_.size() > kMaxRank) {
                    for (std::int64_t j = 0; j < len; ++j) {
                        std::int64_t p = locate(start + j);
                        dst[j] = p < 0 ? L(0) : read_as<L, D>(src[p]);
                    }
                    return;
                }
                load_strided<D>(src, start, len, dst);
                return;
        }
    }

private:
    void classify() {
        if (numel_ == 0) kind_ = Kind::Contiguous;
        else if (axes_.empty()) kind_ = Kind::Scalar;
        else if (axes_.size() == 1 && !axes_[0].checked && axes_[0].stride == 1) kind_ = Kind::Contiguous;
        else if (axes_.size() == 1 && !axes_[0].checked && axes_[0].stride == 0) kind_ = Kind::Scalar;
        else kind_ = Kind::Strided;
    }

    // Walks the block row by row: the outer coordinates give a row position
    // and validity, the innermost axis is a strided run.
    template <DType D, typename L>
    void load_strided(const storage_t<D>* src, std::int64_t start, std::int64_t len, L* dst) const {
        const std::size_t r = axes_.size();
        std::array<std::int64_t, kMaxRank> c{};
        std::int64_t rest = start;
        for (std::size_t i = r; i-- > 0;) {
            c[i] = rest % axes_[i].size;
            rest /= axes_[i].size;
        }
        const StridedAxis& in = axes_[r - 1];
        std::int64_t done = 0;
        while (done < len) {
            std::int64_t row = base_;
            bool valid = true;
            for (std::size_t i = 0; i + 1 < r; ++i) {
                const StridedAxis& a = axes_[i];
                std::int64_t p = c[i] + a.offset;
                if (a.checked && (p < a.lo || p >= a.hi)) valid = false;
                row += p * a.stride;
            }
            std::int64_t run = std::min(len - done, in.size - c[r - 1]);
            L* out = dst + done;
            std::int64_t c0 = c[r - 1] + in.offset;
            // The run's valid elements are one interval [first, last); padding around it reads 0.
            std::int64_t first = 0, last = valid ? run : 0;
            if (valid && in.checked) {
                first = std::clamp(in.lo - c0, std::int64_t{0}, run);
                last = std::clamp(in.hi - c0, first, run);
            }
            std::fill(out, out + first, L(0));
            const std::int64_t at = row + c0 * in.stride;
            if (in.stride == 1)
                for (std::int64_t j = first; j < last; ++j) out[j] = read_as<L, D>(src[at + j]);
            else if (in.stride == 0 && first < last)  // a value broadcast along the run
                std::fill(out + first, out + last, read_as<L, D>(src[at]));
            else
                for (std::int64_t j = first; j < last; ++j) out[j] = read_as<L, D>(src[at + j * in.stride]);
            std::fill(out + last, out + run, L(0));
            done += run;
            c[r - 1] = 0;
            for (std::size_t i = r - 1; i-- > 0;) {
                if (++c[i] < axes_[i].size) break;
                c[i] = 0;
            }
        }
    }

    std::int64_t base_ = 0;
    std::int64_t numel_ = 1;
    std::vector<StridedAxis> axes_;
    Kind kind_ = Kind::Scalar;
};

// Loads elements [start, start + len) of a view over a buffer of dtype `d`
// as lane type L.
template <typename L>
inline void load_view(DType d, const std::byte* src, const StridedView& v, std::int64_t start, std::int64_t len,
                      L* dst) {
    visit_dtype(d, [&]<DType D>(DTypeTag<D>) {
        v.template load<D, L>(reinterpret_cast<const storage_t<D>*>(src), start, len, dst);
    });
}

// Stores lane values into elements [start, start + len) of a contiguous
// buffer of dtype `d`, converting with the Cast semantics.
template <typename L>
inline void store_lanes(DType d, const L* src, std::int64_t len, std::byte* dst, std::int64_t start) {
    visit_dtype(d, [&]<DType D>(DTypeTag<D>) {
        auto* out = reinterpret_cast<storage_t<D>*>(dst) + start;
        if constexpr (std::is_same_v<L, lane_t<D>> && (D == DType::F32 || D == DType::I64))
            std::copy(src, src + len, out);
        else  // a local bound: `len` read through the reference may alias a byte-sized `out`
            for (std::int64_t j = 0, n = len; j < n; ++j) out[j] = write_as<D>(src[j]);
    });
}

}  // namespace luminal::cpu

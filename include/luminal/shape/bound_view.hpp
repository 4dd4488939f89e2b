#pragma once
// A ShapeTracker with its dimensions bound to numbers, for interpreting views
// element by element. It walks the axes directly instead of evaluating
// index_expression(), so the reference runtime checks the code generators'
// index algebra rather than sharing it.
#include <cstdint>
#include <vector>

#include "luminal/shape/shape_tracker.hpp"

namespace luminal {

class BoundView {
public:
    BoundView(const ShapeTracker& view, const DynMap& dims) : base_(view.base().eval(dims)) {
        for (auto& a : view.axes()) {
            axes_.push_back({a.size.eval(dims), a.stride.eval(dims), a.offset.eval(dims), a.valid_lo.eval(dims),
                             a.valid_hi.eval(dims)});
            numel_ *= axes_.back().size;
        }
        contiguous_ = view.is_contiguous();
    }

    std::int64_t numel() const { return numel_; }
    std::int64_t dim(std::size_t axis) const { return axes_[axis].size; }

    // Buffer position of logical element `index`, or -1 where the view reads padding.
    std::int64_t locate(std::int64_t index) const {
        if (contiguous_) return index;
        std::int64_t position = base_;
        for (std::size_t i = axes_.size(); i-- > 0;) {
            const Axis& a = axes_[i];
            std::int64_t p = index % a.size + a.offset;
            index /= a.size;
            if (p < a.lo || p >= a.hi) return -1;
            position += p * a.stride;
        }
        return position;
    }

private:
    struct Axis {
        std::int64_t size, stride, offset, lo, hi;
    };
    std::vector<Axis> axes_;
    std::int64_t base_;
    std::int64_t numel_ = 1;
    bool contiguous_ = false;
};

}  // namespace luminal

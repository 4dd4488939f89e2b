#pragma once
// ShapeTracker: how a node reads one of its inputs. It maps the logical
// row-major element index of a view to an offset in the producer's contiguous
// buffer, plus a predicate telling whether that element exists (padding reads 0).
//
// Each axis keeps: logical size, stride into the buffer, an offset and a valid
// window. Logical coordinate c maps to p = c + offset; the element is valid iff
// valid_lo <= p < valid_hi, and then lives at base + sum(p * stride). Slicing and
// padding compose in this form exactly, so any chain of permute / expand / slice
// / pad stays one affine map plus one predicate. Reshape composes when axes can
// be split or merged in place; otherwise the caller must copy (see reshape()).
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/shape/expression.hpp"

namespace luminal {

using Shape = std::vector<Expression>;

std::string to_string(const Shape& shape);

class ShapeTracker {
public:
    struct Axis {
        Expression size, stride, offset, valid_lo, valid_hi;
        friend bool operator==(const Axis&, const Axis&) = default;
    };

    ShapeTracker() = default;
    explicit ShapeTracker(const Shape& dims) : axes_(dims.size()) {
        Expression stride = 1;
        for (std::size_t i = dims.size(); i-- > 0;) {
            axes_[i] = Axis{dims[i], stride, 0, 0, dims[i]};
            stride = stride * dims[i];
        }
    }

    std::size_t rank() const { return axes_.size(); }
    const std::vector<Axis>& axes() const { return axes_; }
    Expression base() const { return base_; }
    Shape dims() const {
        Shape out;
        for (auto& a : axes_) out.push_back(a.size);
        return out;
    }
    Expression dim(std::size_t axis) const { return axes_.at(checked_axis(axis, "dim")).size; }
    Expression numel() const {
        Expression n = 1;
        for (auto& a : axes_) n = n * a.size;
        return n;
    }
    bool is_broadcast(std::size_t axis) const { return is_zero(axes_.at(axis).stride); }
    bool axis_fully_valid(std::size_t axis) const {
        auto& a = axes_.at(axis);
        // An axis no slice or pad touched (offset 0, window [0, size)), most of them, needs no proof.
        if (is_zero(a.offset) && is_zero(a.valid_lo) && a.valid_hi == a.size) return true;
        return le(a.valid_lo, a.offset) == Expression(1) && le(a.offset + a.size, a.valid_hi) == Expression(1);
    }
    bool is_padded_or_masked() const {
        for (std::size_t i = 0; i < rank(); ++i)
            if (!axis_fully_valid(i)) return true;
        return false;
    }
    // True when the view reads the producer's buffer in order with no gaps:
    // when it equals ShapeTracker(dims()), compared axis by axis from the last
    // so that a view that is not stops before the strides are multiplied out.
    bool is_contiguous() const {
        const Expression zero = 0;
        if (base_ != zero) return false;
        Expression stride = 1;
        for (std::size_t i = axes_.size(); i-- > 0;) {
            const Axis& a = axes_[i];
            if (a.stride != stride || a.offset != zero || a.valid_lo != zero || a.valid_hi != a.size) return false;
            if (i > 0) stride = stride * a.size;
        }
        return true;
    }

    ShapeTracker permute(const std::vector<std::size_t>& order) const {
        check(order.size() == rank(), "permute", "order has {} axes but the tensor has rank {}", order.size(), rank());
        std::vector<bool> used(rank(), false);
        ShapeTracker out = *this;
        for (std::size_t i = 0; i < order.size(); ++i) {
            check(order[i] < rank() && !used[order[i]], "permute", "order {} is not a permutation of 0..{}",
                  fmt::join(order, ","), rank() - 1);
            used[order[i]] = true;
            out.axes_[i] = axes_[order[i]];
        }
        return out;
    }

    // Inserts a broadcast axis of `size` before position `axis`.
    ShapeTracker expand_dim(std::size_t axis, Expression size) const {
        check(axis <= rank(), "expand_dim", "axis {} out of range for rank {}", axis, rank());
        ShapeTracker out = *this;
        out.axes_.insert(out.axes_.begin() + static_cast<std::ptrdiff_t>(axis), Axis{size, 0, 0, 0, size});
        return out;
    }

    // Broadcasts an existing axis of size 1 to `size`. Throws when that one element
    // is padding, which cannot be broadcast in place (copy first).
    ShapeTracker expand(std::size_t axis, Expression size) const {
        checked_axis(axis, "expand");
        auto& a = axes_[axis];
        if (a.size == size) return *this;
        check(a.size == Expression(1), "expand", "axis {} has size {}, only size-1 axes broadcast (to {})", axis,
              a.size, size);
        check(axis_fully_valid(axis), "expand", "axis {} is padding and cannot be broadcast in place", axis);
        ShapeTracker out = *this;
        out.base_ = base_ + a.offset * a.stride;
        out.axes_[axis] = Axis{size, 0, 0, 0, size};
        return out;
    }

    // Gives `axis` another expression for its size, one that a shape guard checks
    // equal to the current one at every execution (the elements read do not change).
    ShapeTracker with_size(std::size_t axis, Expression size) const {
        checked_axis(axis, "with_size");
        ShapeTracker out = *this;
        out.axes_[axis].size = size;
        return out;
    }

    // Drops a broadcast axis (stride 0, no padding): reading it never moved.
    ShapeTracker remove_broadcast_axis(std::size_t axis) const {
        checked_axis(axis, "remove_broadcast_axis");
        check(is_broadcast(axis) && axis_fully_valid(axis), "remove_broadcast_axis", "axis {} of {} is not a broadcast axis",
              axis, to_string());
        ShapeTracker out = *this;
        out.axes_.erase(out.axes_.begin() + static_cast<std::ptrdiff_t>(axis));
        return out;
    }

    // Keeps logical [start, min(end, size)) of `axis`.
    ShapeTracker slice(std::size_t axis, Expression start, Expression end) const {
        checked_axis(axis, "slice");
        ShapeTracker out = *this;
        Axis& a = out.axes_[axis];
        Expression stop = min(end, a.size);
        check(le(start, stop) != Expression(0), "slice", "axis {}: start {} is past end {}", axis, start, stop);
        a.offset = a.offset + start;
        a.size = stop - start;
        return out;
    }

    // Adds `before` and `after` zero elements around `axis`.
    ShapeTracker pad(std::size_t axis, Expression before, Expression after) const {
        checked_axis(axis, "pad");
        ShapeTracker out = *this;
        Axis& a = out.axes_[axis];
        a.valid_lo = max(a.valid_lo, a.offset);
        a.valid_hi = min(a.valid_hi, a.offset + a.size);
        a.offset = a.offset - before;
        a.size = a.size + before + after;
        return out;
    }

    // Reinterprets the view with new dims in place when the axes split or merge
    // without moving data; std::nullopt when a contiguous copy is needed first.
    std::optional<ShapeTracker> reshape(const Shape& new_dims) const;
    std::optional<ShapeTracker> merge_dims(std::size_t axis) const {  // merges axis and axis + 1
        check(axis + 1 < rank(), "merge_dims", "axes {} and {} out of range for rank {}", axis, axis + 1, rank());
        Shape d = dims();
        d[axis] = d[axis] * d[axis + 1];
        d.erase(d.begin() + static_cast<std::ptrdiff_t>(axis) + 1);
        return reshape(d);
    }
    std::optional<ShapeTracker> split_dims(std::size_t axis, Expression inner) const {
        checked_axis(axis, "split_dims");
        Shape d = dims();
        Expression outer = d[axis] / inner;
        check(outer * inner == d[axis] || !(outer * inner).is_constant(), "split_dims",
              "axis {} of size {} is not divisible by {}", axis, d[axis], inner);
        d[axis] = inner;
        d.insert(d.begin() + static_cast<std::ptrdiff_t>(axis), outer);
        return reshape(d);
    }

    // Logical row-major index (Expression::index()) -> logical coordinate of `axis`. A size-1 axis sits
    // at 0, and the first axis of another size takes the index whole (index / inner, no modulo) as axis 0
    // would: for every index in range these are equal, and said outright they make views that differ only
    // in size-1 axes index alike, which the simplifier could not prove (index / inner is not 0 to it).
    Expression coordinate(std::size_t axis) const {
        auto is_one = [](const Expression& size) {
            const auto c = size.as_constant();
            return c && *c == 1;
        };
        if (is_one(axes_[axis].size)) return 0;
        Expression inner = 1;
        for (std::size_t i = axis + 1; i < rank(); ++i) inner = inner * axes_[i].size;
        Expression c = Expression::index() / inner;
        const bool leading = std::all_of(axes_.begin(), axes_.begin() + static_cast<std::ptrdiff_t>(axis),
                                         [&](const Axis& a) { return is_one(a.size); });
        return leading ? c : c % axes_[axis].size;
    }
    // Buffer offset read for the element at Expression::index().
    Expression index_expression() const {
        return remembered(Built::Index, [&] {
            Expression index = base_;
            for (std::size_t i = 0; i < rank(); ++i)
                if (!is_zero(axes_[i].stride)) index = index + (coordinate(i) + axes_[i].offset) * axes_[i].stride;
            return index;
        });
    }
    // 1 where the element at Expression::index() exists, 0 where it is padding.
    Expression valid_expression() const {
        return remembered(Built::Valid, [&] {
            Expression valid = 1;
            for (std::size_t i = 0; i < rank(); ++i) {
                if (axis_fully_valid(i)) continue;
                Expression p = coordinate(i) + axes_[i].offset;
                valid = logical_and(valid, logical_and(le(axes_[i].valid_lo, p), lt(p, axes_[i].valid_hi)));
            }
            return valid;
        });
    }

    friend bool operator==(const ShapeTracker&, const ShapeTracker&) = default;
    std::size_t hash() const {
        std::size_t h = base_.hash();
        for (auto& a : axes_)
            for (auto& e : {a.size, a.stride, a.offset, a.valid_lo, a.valid_hi}) h = h * 1000003u ^ e.hash();
        return h;
    }
    std::string to_string() const;

private:
    // Without interning a 0 to compare with: views are tested many times over during saturation.
    static bool is_zero(const Expression& e) { return e.as_constant() == std::int64_t{0}; }

    // A view's index and validity are functions of the view alone, asked for again and again
    // by the rules and the cost model while a model compiles: each is built once per view and
    // thread (interned expressions live as long as the process).
    enum class Built : std::uint8_t { Index, Valid };
    template <typename Build>
    Expression remembered(Built which, Build&& build) const {
        struct Hash {
            std::size_t operator()(const ShapeTracker& v) const { return v.hash(); }
        };
        thread_local absl::flat_hash_map<ShapeTracker, Expression, Hash> known[2];
        auto& views = known[static_cast<std::size_t>(which)];
        if (auto it = views.find(*this); it != views.end()) return it->second;
        const Expression e = build();
        views.emplace(*this, e);
        return e;
    }

    // The shape is printed only when the axis is out of range (check() would format it every time).
    std::size_t checked_axis(std::size_t axis, const char* where) const {
        if (axis >= rank())
            throw Error(where, fmt::format("axis {} out of range for a view of rank {} (shape {})", axis, rank(),
                                           luminal::to_string(dims())));
        return axis;
    }

    std::vector<Axis> axes_;
    Expression base_ = 0;
};

inline std::string to_string(const Shape& shape) {
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + shape[i].to_string();
    return out + "]";
}

inline std::string ShapeTracker::to_string() const {
    std::string out = "view(shape=" + luminal::to_string(dims()) + ", strides=[";
    for (std::size_t i = 0; i < rank(); ++i) out += (i ? ", " : "") + axes_[i].stride.to_string();
    out += "]";
    if (!(base_ == Expression(0))) out += ", base=" + base_.to_string();
    if (is_padded_or_masked()) out += ", valid=" + valid_expression().to_string();
    return out + ")";
}

inline std::optional<ShapeTracker> ShapeTracker::reshape(const Shape& new_dims) const {
    check(product(new_dims) == numel() || !(product(new_dims) - numel()).is_constant(), "reshape",
          "cannot reshape {} ({} elements) to {} ({} elements)", luminal::to_string(dims()), numel(),
          luminal::to_string(new_dims), product(new_dims));
    // Size-1 axes carry no coordinate: fold their offset into the base and drop them.
    ShapeTracker src;
    src.base_ = base_;
    for (std::size_t i = 0; i < rank(); ++i) {
        if (axes_[i].size == Expression(1) && axis_fully_valid(i))
            src.base_ = src.base_ + axes_[i].offset * axes_[i].stride;
        else
            src.axes_.push_back(axes_[i]);
    }
    ShapeTracker out;
    out.base_ = src.base_;
    std::size_t next_old = 0, next_new = 0;
    while (next_new < new_dims.size() || next_old < src.rank()) {
        if (next_new < new_dims.size() && new_dims[next_new] == Expression(1)) {
            out.axes_.push_back(Axis{1, 0, 0, 0, 1});
            ++next_new;
            continue;
        }
        if (next_new == new_dims.size() || next_old == src.rank()) return std::nullopt;
        // Grow a group of old axes and a group of new axes until their sizes agree.
        std::size_t old_end = next_old + 1, new_end = next_new + 1;
        Expression old_size = src.axes_[next_old].size, new_size = new_dims[next_new];
        while (!(old_size == new_size)) {
            auto o = old_size.as_constant(), n = new_size.as_constant();
            bool grow_new = o && n ? *n < *o : new_end - next_new <= old_end - next_old;
            if (grow_new && new_end < new_dims.size()) new_size = new_size * new_dims[new_end++];
            else if (old_end < src.rank()) old_size = old_size * src.axes_[old_end++].size;
            else if (new_end < new_dims.size()) new_size = new_size * new_dims[new_end++];
            else return std::nullopt;
        }
        // A group of one padded or sliced axis can only be renamed, not split or merged.
        bool single_old = old_end - next_old == 1;
        for (std::size_t i = next_old; i < old_end; ++i) {
            const Axis& a = src.axes_[i];
            bool plain = src.axis_fully_valid(i) && (single_old || a.offset == Expression(0));
            if (!plain && !(single_old && new_end - next_new == 1)) return std::nullopt;
            if (i + 1 < old_end && !(a.stride == src.axes_[i + 1].stride * src.axes_[i + 1].size)) return std::nullopt;
        }
        if (single_old && new_end - next_new == 1) {
            out.axes_.push_back(src.axes_[next_old]);
            out.axes_.back().size = new_dims[next_new];
        } else {
            Expression stride = src.axes_[old_end - 1].stride;
            std::vector<Axis> group(new_end - next_new);
            for (std::size_t j = group.size(); j-- > 0;) {
                Expression size = new_dims[next_new + j];
                group[j] = Axis{size, stride, 0, 0, size};
                stride = stride * size;
            }
            // A lone sliced axis being split keeps its offset on the innermost part.
            Axis& inner = group.back();
            inner.offset = src.axes_[next_old].offset;
            inner.valid_lo = inner.offset;
            inner.valid_hi = inner.offset + inner.size;
            if (!single_old) inner.offset = inner.valid_lo = 0, inner.valid_hi = inner.size;
            out.axes_.insert(out.axes_.end(), group.begin(), group.end());
        }
        next_old = old_end;
        next_new = new_end;
    }
    return out;
}

}  // namespace luminal

#pragma once
// What a graph assumes about its dynamic dimensions without being able to prove
// it when the graph is built: the ranges its dimensions were declared with, and
// sizes an op needed equal that the simplifier could neither prove equal nor
// unequal. A compiled program checks them at every execution, so an assumption
// that does not hold is an Error naming the sizes, never a wrong result.
#include <string>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/shape/dyn_map.hpp"
#include "luminal/shape/expression.hpp"

namespace luminal {

struct DimRange {
    char name;
    std::int64_t lo, hi;  // hi is unbounded when >= 2^62
    friend bool operator==(const DimRange&, const DimRange&) = default;
};

struct SizeEquality {
    Expression a, b;
    std::string where;  // the op that assumed it
};

class ShapeGuards {
public:
    // Records the range of every dimension `size` uses that has one tighter than
    // the default [0, inf); one name with two ranges is an Error.
    void record_ranges(const Expression& size) {
        for (const Expression& v : size.variables()) {
            if (v.lower_bound() == 0 && !v.bounded_above()) continue;
            DimRange range{v.var(), v.lower_bound(), v.upper_bound()};
            bool known = false;
            for (const DimRange& r : ranges_) {
                if (r.name != range.name) continue;
                check(r == range, "Graph", "dimension '{}' is used with two ranges, {} and {}", r.name, describe(r),
                      describe(range));
                known = true;
            }
            if (!known) ranges_.push_back(range);
        }
    }

    // Sizes `where` needs equal that the simplifier cannot decide.
    void require_equal(const Expression& a, const Expression& b, std::string where) {
        for (const SizeEquality& e : equalities_)
            if ((e.a == a && e.b == b) || (e.a == b && e.b == a)) return;
        record_ranges(a);
        record_ranges(b);
        equalities_.push_back({a, b, std::move(where)});
    }

    // Throws an Error at the first assumption `dims` violates.
    void check_against(const DynMap& dims) const {
        for (const DimRange& r : ranges_) {
            std::optional<std::int64_t> value = dims.get(r.name);
            check(!value || (*value >= r.lo && *value <= r.hi), "shape guard",
                  "dimension '{}' is {}, outside the range {} the graph was compiled for", r.name, value.value_or(0),
                  describe(r));
        }
        for (const SizeEquality& e : equalities_) {
            std::int64_t a = e.a.eval(dims), b = e.b.eval(dims);
            check(a == b, "shape guard",
                  "{} assumed the sizes {} and {} equal, but here they are {} and {} (dims {})", e.where, e.a, e.b, a,
                  b, describe(dims));
        }
    }

    const std::vector<DimRange>& ranges() const { return ranges_; }
    const std::vector<SizeEquality>& equalities() const { return equalities_; }

private:
    static std::string describe(const DimRange& r) {
        return r.hi >= detail::kPosInf ? fmt::format("[{}, inf)", r.lo) : fmt::format("[{}, {}]", r.lo, r.hi);
    }
    static std::string describe(const DynMap& dims) {
        std::string out;
        for (auto [name, value] : dims.entries()) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", name, value);
        return out;
    }

    std::vector<DimRange> ranges_;
    std::vector<SizeEquality> equalities_;
};

}  // namespace luminal

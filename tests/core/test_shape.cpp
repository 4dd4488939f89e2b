// ShapeTracker: each view is checked by reading a buffer holding 0..n-1, so a
// read value is the buffer position; expected positions are written out by hand
// (or by nested loops that restate the movement's definition).
#include <doctest/doctest.h>

#include <vector>

#include <luminal/luminal.hpp>

using namespace luminal;

namespace {

// Positions the view reads, -1 for padding, via index/valid expressions.
std::vector<std::int64_t> reads(const ShapeTracker& view, const DynMap& dims = {}) {
    std::vector<std::int64_t> out;
    Expression index = view.index_expression(), valid = view.valid_expression();
    std::int64_t n = view.numel().eval(dims);
    for (std::int64_t i = 0; i < n; ++i) out.push_back(valid.eval(dims, i) ? index.eval(dims, i) : -1);
    return out;
}

// The same through the reference runtime's direct axis walk.
std::vector<std::int64_t> walks(const ShapeTracker& view, const DynMap& dims = {}) {
    BoundView bound(view, dims);
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < bound.numel(); ++i) out.push_back(bound.locate(i));
    return out;
}

void check_view(const ShapeTracker& view, const std::vector<std::int64_t>& expected, const DynMap& dims = {}) {
    CHECK(reads(view, dims) == expected);
    CHECK(walks(view, dims) == expected);
}

}  // namespace

TEST_CASE("contiguous view is the identity") {
    ShapeTracker t({2, 3});
    CHECK(t.is_contiguous());
    CHECK(t.index_expression() == Expression::index());
    CHECK(t.valid_expression() == Expression(1));
    check_view(t, {0, 1, 2, 3, 4, 5});
}

TEST_CASE("permute") {
    ShapeTracker t = ShapeTracker({2, 3}).permute({1, 0});
    CHECK(t.dims() == Shape{3, 2});
    check_view(t, {0, 3, 1, 4, 2, 5});
    std::vector<std::int64_t> expected;  // [2,3,4] -> [4,2,3]: out[k][i][j] = in[i][j][k]
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j) expected.push_back(i * 12 + j * 4 + k);
    check_view(ShapeTracker({2, 3, 4}).permute({2, 0, 1}), expected);
}

TEST_CASE("expand and expand_dim broadcast with stride 0") {
    check_view(ShapeTracker({3}).expand_dim(0, 2), {0, 1, 2, 0, 1, 2});
    check_view(ShapeTracker({3}).expand_dim(1, 2), {0, 0, 1, 1, 2, 2});
    check_view(ShapeTracker({3, 1}).expand(1, 2), {0, 0, 1, 1, 2, 2});
    CHECK_THROWS_AS(ShapeTracker({3, 2}).expand(1, 4), Error);
}

TEST_CASE("slice") {
    check_view(ShapeTracker({4}).slice(0, 1, 3), {1, 2});
    check_view(ShapeTracker({2, 4}).slice(1, 1, 100), {1, 2, 3, 5, 6, 7});  // end clamps
    check_view(ShapeTracker({4, 2}).permute({1, 0}).slice(1, 2, 4), {4, 6, 5, 7});
    check_view(ShapeTracker({6}).slice(0, 1, 5).slice(0, 1, 3), {2, 3});
}

TEST_CASE("pad reads padding as invalid") {
    check_view(ShapeTracker({2}).pad(0, 1, 2), {-1, 0, 1, -1, -1});
    check_view(ShapeTracker({2, 2}).pad(1, 1, 0), {-1, 0, 1, -1, 2, 3});
    // slice into padding, then pad again
    check_view(ShapeTracker({3}).pad(0, 2, 0).slice(0, 1, 4).pad(0, 0, 1), {-1, 0, 1, -1});
    // pad then slice away the padding: valid everywhere again
    ShapeTracker back = ShapeTracker({3}).pad(0, 1, 1).slice(0, 1, 4);
    check_view(back, {0, 1, 2});
    CHECK(back.valid_expression() == Expression(1));
}

TEST_CASE("reshape composes when axes split or merge in place") {
    auto merged = ShapeTracker({2, 3, 4}).reshape({6, 4});
    REQUIRE(merged);
    CHECK(merged->is_contiguous());
    // [6,4]^T = [4,6] split to [4,2,3]: splits the strided axis in place.
    auto split = ShapeTracker({6, 4}).permute({1, 0}).reshape({4, 2, 3});
    REQUIRE(split);
    std::vector<std::int64_t> expected;
    for (int k = 0; k < 4; ++k)
        for (int r = 0; r < 6; ++r) expected.push_back(r * 4 + k);
    check_view(*split, expected);
    // Merging across a permute needs a copy.
    CHECK_FALSE(ShapeTracker({2, 3}).permute({1, 0}).reshape({6}).has_value());
    // Size-1 axes may be inserted and removed freely.
    auto ones = ShapeTracker({3, 1, 2}).slice(0, 1, 3).reshape({1, 2, 2, 1});
    REQUIRE(ones);
    check_view(*ones, {2, 3, 4, 5});
    CHECK_THROWS_AS(ShapeTracker({2, 3}).reshape({4}), Error);
}

TEST_CASE("split_dims and merge_dims") {
    auto split = ShapeTracker({12}).split_dims(0, 4);
    REQUIRE(split);
    CHECK(split->dims() == Shape{3, 4});
    auto merged = ShapeTracker({3, 4}).merge_dims(0);
    REQUIRE(merged);
    CHECK(merged->dims() == Shape{12});
    CHECK_THROWS_AS(ShapeTracker({10}).split_dims(0, 4), Error);
}

TEST_CASE("symbolic dims") {
    Expression s = 's';
    ShapeTracker t = ShapeTracker({s, 3}).permute({1, 0});
    DynMap dims{{'s', 2}};
    check_view(t, {0, 3, 1, 4, 2, 5}, dims);
    auto flat = ShapeTracker({s, 3}).reshape({s * 3});
    REQUIRE(flat);
    CHECK(flat->is_contiguous());
    check_view(ShapeTracker({s}).pad(0, 1, 0).slice(0, 0, s), {-1, 0}, {{'s', 2}});
}

TEST_CASE("bad axes are errors naming the shape") {
    CHECK_THROWS_WITH_AS(ShapeTracker({2, 3}).slice(2, 0, 1), doctest::Contains("[2, 3]"), Error);
    CHECK_THROWS_AS(ShapeTracker({2, 3}).permute({0, 0}), Error);
    CHECK_THROWS_AS(ShapeTracker({2, 3}).permute({0}), Error);
    CHECK_THROWS_AS(ShapeTracker({4}).slice(0, 3, 1), Error);
}

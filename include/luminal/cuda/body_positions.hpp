#pragma once
// A body's integer step read as a scatter's positions: its value at element z
// as a(z) + u, where a is an expression of z and u is the same for every
// element (it reads inputs only through broadcast views: a cache length held
// in a tensor, as transformers' StaticCache keeps it). Positions a(z) + u are
// distinct wherever a's are, whatever u is at run time
// (shape/distinct_positions.hpp), so a write at them needs no claims.
#include <optional>
#include <vector>

#include "luminal/cuda/kernel_ir.hpp"

namespace luminal::cuda {

namespace positions_detail {

// What a step's value is over the elements: the same for all (Uniform), a(z)
// (Moving), a(z) plus a uniform part (Shifted), or none of these.
struct Part {
    enum class Kind : std::uint8_t { Uniform, Moving, Shifted, Other } kind = Kind::Other;
    Expression a = 0;

    bool uniform() const { return kind == Kind::Uniform || (kind == Kind::Moving && !a.uses_index()); }
    std::optional<std::int64_t> constant() const { return kind == Kind::Moving ? a.as_constant() : std::nullopt; }
};

// Integer arithmetic that holds positions without wrapping.
inline bool wide_integer(DType t) { return is_integer(t) && size_of(t) >= 4; }
inline bool widening(DType from, DType to) { return is_integer(from) && wide_integer(to) && size_of(from) <= size_of(to); }

inline Part combine(const Step& s, const Part& x, const Part& y) {
    using K = Part::Kind;
    const bool both_uniform = x.uniform() && y.uniform();
    if (s.op == OpKind::Add && wide_integer(s.dtype)) {
        if (x.kind == K::Moving && y.kind == K::Moving) return {K::Moving, x.a + y.a};
        if (both_uniform) return {K::Uniform};
        const auto moving = [](const Part& p) -> std::optional<Expression> {
            if (p.kind == K::Moving || p.kind == K::Shifted) return p.a;
            if (p.kind == K::Uniform) return Expression(0);
            return std::nullopt;
        };
        const auto ma = moving(x), mb = moving(y);
        if (ma && mb) return {K::Shifted, *ma + *mb};
        return {};
    }
    if (s.op == OpKind::Mul && wide_integer(s.dtype)) {
        if (both_uniform) return x.kind == K::Moving && y.kind == K::Moving ? Part{K::Moving, x.a * y.a} : Part{K::Uniform};
        const Part* scaled = y.constant() ? &x : x.constant() ? &y : nullptr;
        const std::optional<std::int64_t> by = y.constant() ? y.constant() : x.constant();
        if (scaled && (scaled->kind == K::Moving || scaled->kind == K::Shifted)) return {scaled->kind, scaled->a * *by};
        return {};
    }
    return both_uniform ? Part{K::Uniform} : Part{};
}

}  // namespace positions_detail

// a, where step `at` of `body` computes a(z) + u with u the same for every element z.
inline std::optional<Expression> moving_part(const Body& body, std::uint16_t at) {
    using namespace positions_detail;
    using K = Part::Kind;
    std::vector<Part> parts;
    for (std::size_t j = 0; j <= at && j < body.steps.size(); ++j) {
        const Step& s = body.steps[j];
        Part p;
        switch (s.kind) {
            case StepKind::Constant:
                if (is_integer(s.dtype)) p = {K::Moving, Expression(static_cast<std::int64_t>(s.value))};
                else p = {K::Uniform};
                break;
            case StepKind::Index: p = {K::Moving, s.index}; break;
            case StepKind::Load: {
                const bool broadcast = !s.view.index_expression().uses_index() && !s.view.valid_expression().uses_index();
                const bool gathered_at_uniform = s.at != kAtElement && parts[static_cast<std::size_t>(s.at)].uniform();
                if (broadcast || gathered_at_uniform) p = {K::Uniform};
                break;
            }
            case StepKind::Cast:
                if (widening(body.steps[s.a].dtype, s.dtype)) p = parts[s.a];
                else if (parts[s.a].uniform()) p = {K::Uniform};
                break;
            case StepKind::Unary:
                if (parts[s.a].uniform()) p = {K::Uniform};
                break;
            case StepKind::Masked:
                if (parts[s.a].uniform() && parts[s.b].uniform()) p = {K::Uniform};
                break;
            case StepKind::Binary: p = combine(s, parts[s.a], parts[s.b]); break;
            case StepKind::StageValue: break;
        }
        parts.push_back(p);
    }
    if (at >= parts.size()) return std::nullopt;
    const Part& result = parts[at];
    if (result.kind == K::Moving || result.kind == K::Shifted) return result.a;
    if (result.kind == K::Uniform) return Expression(0);
    return std::nullopt;
}

}  // namespace luminal::cuda

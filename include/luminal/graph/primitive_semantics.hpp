#pragma once
// What each elementwise primitive computes on one element, written once: in
// the wide types the reference holds values in (double for floats, int64 for
// integers, wrapping). The caller rounds or wraps the result to the node's
// dtype. The ReferenceRuntime (primitives and fused regions) and constant
// folding use these; the CPU kernels are tested against them.
#include <cmath>
#include <cstdint>

#include "luminal/graph/op.hpp"

namespace luminal::semantics {

inline double unary(OpKind kind, double x) {
    switch (kind) {
        case OpKind::Log2: return std::log2(x);
        case OpKind::Exp2: return std::exp2(x);
        case OpKind::Sin: return std::sin(x);
        case OpKind::Sqrt: return std::sqrt(x);
        case OpKind::Recip: return 1.0 / x;
        default: throw Error("semantics", fmt::format("{} is not a unary primitive", name_of(kind)));
    }
}

// torch.remainder for floats: fmod, moved into the divisor's sign.
inline double float_mod(double a, double b) {
    double r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// LessThan gives 0 or 1.
inline double binary(OpKind kind, double x, double y) {
    switch (kind) {
        case OpKind::Add: return x + y;
        case OpKind::Mul: return x * y;
        case OpKind::Mod: return float_mod(x, y);
        case OpKind::LessThan: return x < y;
        default: throw Error("semantics", fmt::format("{} is not a binary primitive", name_of(kind)));
    }
}

// Two's-complement arithmetic; integer Mod is floor modulo (the caller rejects a zero divisor).
inline std::int64_t binary(OpKind kind, std::int64_t x, std::int64_t y) {
    auto ux = static_cast<std::uint64_t>(x), uy = static_cast<std::uint64_t>(y);
    switch (kind) {
        case OpKind::Add: return static_cast<std::int64_t>(ux + uy);
        case OpKind::Mul: return static_cast<std::int64_t>(ux * uy);
        case OpKind::Mod: return detail::floor_mod(x, y);
        case OpKind::LessThan: return x < y;
        default: throw Error("semantics", fmt::format("{} is not a binary primitive", name_of(kind)));
    }
}

// `kind` applied to the one-element operands a (and b), stored at out[o]
// rounded to out's dtype. Integer modulo by zero is an Error naming the node
// and the element being computed.
inline void apply(OpKind kind, const HostBuffer& a, const HostBuffer* b, HostBuffer& out, std::size_t o, std::uint32_t node,
                  std::int64_t element) {
    if (is_unary(kind)) {
        out.store_double(o, unary(kind, a.as_double(0)));
    } else if (is_float(a.dtype)) {
        const double v = binary(kind, a.as_double(0), b->as_double(0));
        if (kind == OpKind::LessThan) out.store_int(o, static_cast<std::int64_t>(v));
        else out.store_double(o, v);
    } else {
        const std::int64_t x = a.as_int(0), y = b->as_int(0);
        check(kind != OpKind::Mod || y != 0, "Mod", "node {}: integer modulo by zero at element {}", node, element);
        out.store_int(o, binary(kind, x, y));
    }
}

}  // namespace luminal::semantics

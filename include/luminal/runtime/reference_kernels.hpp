#pragma once
// The reference semantics of each HLIR primitive (see graph/op.hpp).
#include <cmath>
#include <limits>

namespace luminal {

namespace detail {

inline double apply_unary(OpKind kind, double x) {
    switch (kind) {
        case OpKind::Log2: return std::log2(x);
        case OpKind::Exp2: return std::exp2(x);
        case OpKind::Sin: return std::sin(x);
        case OpKind::Sqrt: return std::sqrt(x);
        case OpKind::Recip: return 1.0 / x;
        default: return 0;
    }
}

// torch.remainder for floats: fmod, moved into the divisor's sign.
inline double float_mod(double a, double b) {
    double r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

}  // namespace detail

inline HostBuffer ReferenceRuntime::run(const ProgramNode& program_node, std::uint32_t id, std::int64_t n,
                                        const DynMap& dims) const {
    const NodeSpec& node = program_node.spec;
    const auto kind = static_cast<OpKind>(node.kind);
    HostBuffer out(node.dtype, static_cast<std::size_t>(n));
    auto size = static_cast<std::size_t>(n);

    if (kind == OpKind::Constant) {
        out.store_double(0, node.op.value);
    } else if (kind == OpKind::Iota) {
        Expression bound = node.op.iota.bind(dims);
        for (std::size_t i = 0; i < size; ++i) out.store_int(i, bound.eval(dims, static_cast<std::int64_t>(i)));
    } else if (kind == OpKind::Output || kind == OpKind::Cast) {
        InputReader in = reader(program_node, id, 0, dims);
        for (std::size_t i = 0; i < size; ++i) in.copy_to(out, i, static_cast<std::int64_t>(i));
    } else if (is_unary(kind)) {
        InputReader in = reader(program_node, id, 0, dims);
        check(is_float(in.buffer.dtype), name_of(kind).data(), "node {} needs a float input, got {}", id,
              name_of(in.buffer.dtype));
        for (std::size_t i = 0; i < size; ++i)
            out.store_double(i, detail::apply_unary(kind, in.f(static_cast<std::int64_t>(i))));
    } else if (is_binary(kind)) {
        InputReader a = reader(program_node, id, 0, dims), b = reader(program_node, id, 1, dims);
        bool floats = is_float(a.buffer.dtype);
        for (std::size_t i = 0; i < size; ++i) {
            auto e = static_cast<std::int64_t>(i);
            if (floats) {
                double x = a.f(e), y = b.f(e);
                switch (kind) {
                    case OpKind::Add: out.store_double(i, x + y); break;
                    case OpKind::Mul: out.store_double(i, x * y); break;
                    case OpKind::Mod: out.store_double(i, detail::float_mod(x, y)); break;
                    default: out.store_int(i, x < y); break;
                }
            } else {
                std::int64_t x = a.i(e), y = b.i(e);
                switch (kind) {
                    case OpKind::Add: out.store_int(i, static_cast<std::int64_t>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y))); break;
                    case OpKind::Mul: out.store_int(i, static_cast<std::int64_t>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y))); break;
                    case OpKind::Mod:
                        check(y != 0, "Mod", "node {}: integer modulo by zero at element {}", id, i);
                        out.store_int(i, detail::floor_mod(x, y));
                        break;
                    default: out.store_int(i, x < y); break;
                }
            }
        }
    } else if (is_reduce(kind)) {
        InputReader in = reader(program_node, id, 0, dims);
        std::int64_t extent = in.view.dim(node.op.axis), inner = 1;
        for (std::size_t a = node.op.axis + 1; a < node.views[0].rank(); ++a) inner *= in.view.dim(a);
        bool floats = is_float(in.buffer.dtype), sum = kind == OpKind::SumReduce;
        for (std::size_t o = 0; o < size; ++o) {
            auto oi = static_cast<std::int64_t>(o);
            std::int64_t first = (oi / inner) * extent * inner + oi % inner;
            if (floats) {
                double acc = sum ? 0.0 : -std::numeric_limits<double>::infinity();
                for (std::int64_t r = 0; r < extent; ++r) {
                    double v = in.f(first + r * inner);
                    acc = sum ? acc + v : (std::isnan(v) || std::isnan(acc) ? std::nan("") : std::max(acc, v));
                }
                out.store_double(o, acc);
            } else {
                std::int64_t acc = sum ? 0 : std::numeric_limits<std::int64_t>::min();
                if (!sum && node.dtype == DType::I32) acc = std::numeric_limits<std::int32_t>::min();
                if (!sum && (node.dtype == DType::U8 || node.dtype == DType::Bool)) acc = 0;
                for (std::int64_t r = 0; r < extent; ++r) {
                    std::int64_t v = in.i(first + r * inner);
                    acc = sum ? static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v))
                              : std::max(acc, v);
                }
                out.store_int(o, acc);
            }
        }
    } else if (kind == OpKind::Gather) {
        InputReader data = reader(program_node, id, 0, dims), indexes = reader(program_node, id, 1, dims);
        for (std::size_t i = 0; i < size; ++i) {
            std::int64_t at = indexes.i(static_cast<std::int64_t>(i));
            check(at >= 0 && at < data.view.numel(), "Gather", "node {}: index {} at position {} is out of range for {} elements",
                  id, at, i, data.view.numel());
            data.copy_to(out, i, at);
        }
    } else if (kind == OpKind::Scatter) {
        InputReader dest = reader(program_node, id, 0, dims), indexes = reader(program_node, id, 1, dims), src = reader(program_node, id, 2, dims);
        for (std::size_t i = 0; i < size; ++i) dest.copy_to(out, i, static_cast<std::int64_t>(i));
        for (std::int64_t i = 0; i < indexes.view.numel(); ++i) {
            std::int64_t at = indexes.i(i);
            check(at >= 0 && at < n, "Scatter", "node {}: index {} at position {} is out of range for {} elements", id, at, i, n);
            src.copy_to(out, static_cast<std::size_t>(at), i);
        }
    }
    return out;
}

}  // namespace luminal

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
    if (node.kind == symbol_of(BackendOp::Matmul)) {
        run_matmul(program_node, id, out, dims);
        return out;
    }
    if (node.kind == symbol_of(BackendOp::FusedElementwise)) {
        run_fused(program_node, id, out, dims);
        return out;
    }

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

// out[.., i, j] = sum over k of a[.., i, k] * b[.., j, k], accumulated in double
// (floats) or wrapping int64, then rounded once.
inline void ReferenceRuntime::run_matmul(const ProgramNode& node, std::uint32_t id, HostBuffer& out,
                                         const DynMap& dims) const {
    InputReader a = reader(node, id, 0, dims), b = reader(node, id, 1, dims);
    std::size_t r = node.spec.views[0].rank();
    std::int64_t m = a.view.dim(r - 2), k = a.view.dim(r - 1), n = b.view.dim(r - 2);
    std::int64_t batches = m * n == 0 ? 0 : static_cast<std::int64_t>(out.size()) / (m * n);
    bool floats = is_float(a.buffer.dtype);
    for (std::int64_t batch = 0; batch < batches; ++batch)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                std::int64_t iacc = 0;
                for (std::int64_t e = 0; e < k; ++e) {
                    std::int64_t ai = (batch * m + i) * k + e, bi = (batch * n + j) * k + e;
                    if (floats) acc += a.f(ai) * b.f(bi);
                    else iacc = static_cast<std::int64_t>(static_cast<std::uint64_t>(iacc) +
                                                          static_cast<std::uint64_t>(a.i(ai)) * static_cast<std::uint64_t>(b.i(bi)));
                }
                auto o = static_cast<std::size_t>((batch * m + i) * n + j);
                if (floats) out.store_double(o, acc);
                else out.store_int(o, iacc);
            }
}

// Each step is a primitive applied per element, rounded to the step's dtype,
// exactly as the separate primitive nodes would compute it.
inline void ReferenceRuntime::run_fused(const ProgramNode& node, std::uint32_t id, HostBuffer& out,
                                        const DynMap& dims) const {
    const auto& steps = node.spec.fused->steps;
    std::vector<InputReader> inputs;
    for (std::size_t k = 0; k < node.sources.size(); ++k) inputs.push_back(reader(node, id, k, dims));
    std::vector<Expression> iotas;
    for (auto& st : steps) iotas.push_back(st.kind == OpKind::Iota ? st.iota.bind(dims) : Expression(0));
    std::vector<HostBuffer> values;
    for (auto& st : steps) values.emplace_back(st.dtype, 1);
    std::vector<HostBuffer> loaded;
    for (auto& in : inputs) loaded.emplace_back(in.buffer.dtype, 1);
    std::size_t n_in = inputs.size();
    for (std::size_t e = 0; e < out.size(); ++e) {
        auto index = static_cast<std::int64_t>(e);
        for (std::size_t k = 0; k < n_in; ++k) inputs[k].copy_to(loaded[k], 0, index);
        auto value = [&](std::uint16_t slot) -> const HostBuffer& { return slot < n_in ? loaded[slot] : values[slot - n_in]; };
        for (std::size_t j = 0; j < steps.size(); ++j) {
            const FusedStep& st = steps[j];
            HostBuffer& v = values[j];
            switch (st.kind) {
                case OpKind::Constant: v.store_double(0, st.value); break;
                case OpKind::Iota: v.store_int(0, iotas[j].eval(dims, index)); break;
                case OpKind::Cast: v.copy_element(0, value(st.a), 0); break;
                default:
                    if (is_unary(st.kind)) {
                        v.store_double(0, detail::apply_unary(st.kind, value(st.a).as_double(0)));
                    } else if (is_float(value(st.a).dtype)) {
                        double x = value(st.a).as_double(0), y = value(st.b).as_double(0);
                        if (st.kind == OpKind::Add) v.store_double(0, x + y);
                        else if (st.kind == OpKind::Mul) v.store_double(0, x * y);
                        else if (st.kind == OpKind::Mod) v.store_double(0, detail::float_mod(x, y));
                        else v.store_int(0, x < y);
                    } else {
                        std::int64_t x = value(st.a).as_int(0), y = value(st.b).as_int(0);
                        auto ux = static_cast<std::uint64_t>(x), uy = static_cast<std::uint64_t>(y);
                        if (st.kind == OpKind::Add) v.store_int(0, static_cast<std::int64_t>(ux + uy));
                        else if (st.kind == OpKind::Mul) v.store_int(0, static_cast<std::int64_t>(ux * uy));
                        else if (st.kind == OpKind::Mod) {
                            check(y != 0, "Mod", "node {}: integer modulo by zero at element {}", id, e);
                            v.store_int(0, detail::floor_mod(x, y));
                        } else v.store_int(0, x < y);
                    }
            }
        }
        out.copy_element(e, values.back(), 0);
    }
}

}  // namespace luminal

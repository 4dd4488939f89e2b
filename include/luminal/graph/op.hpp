#pragma once
// The HLIR primitives every model reduces to. A node is a pure function of its
// inputs, each read through an explicit view, producing a contiguous tensor.
//
// Semantics (the reference runtime implements exactly these):
//  Log2 Exp2 Sin Sqrt Recip  float -> same float dtype
//  Add Mul                   same dtype in and out (bool: or / and)
//  Mod                       floor modulo, result has the divisor's sign (torch.remainder)
//  LessThan                  same dtype in, Bool out
//  SumReduce MaxReduce       over one axis of the input view; output drops that axis
//                            (empty max is -inf, or the type's minimum for integers)
//  Iota                      out[i] = expr(i) with Expression::index() = i (integer dtype)
//  Gather                    inputs (data, indexes): out[i] = data[indexes[i]], data read as
//                            a flat logical tensor; output has the shape of indexes
//  Scatter                   inputs (dest, indexes, src): out = dest, then for i in order
//                            out[indexes[i]] = src[i]; repeated indexes: the last write wins
//  Cast                      to the node dtype (float -> int truncates toward zero)
//  Input Constant Output     a bound buffer, a scalar, a graph result
//  Custom                    an op declared as a type (graph/backend_op.hpp), in Op::payload
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "luminal/graph/backend_op.hpp"
#include "luminal/shape/expression.hpp"

namespace luminal {

enum class OpKind : std::uint8_t {
    Input, Constant, Output,
    Log2, Exp2, Sin, Sqrt, Recip,
    Add, Mul, Mod, LessThan,
    SumReduce, MaxReduce,
    Iota, Gather, Scatter, Cast,
    Custom,
};

constexpr std::string_view name_of(OpKind k) {
    switch (k) {
        case OpKind::Input: return "Input";
        case OpKind::Constant: return "Constant";
        case OpKind::Output: return "Output";
        case OpKind::Log2: return "Log2";
        case OpKind::Exp2: return "Exp2";
        case OpKind::Sin: return "Sin";
        case OpKind::Sqrt: return "Sqrt";
        case OpKind::Recip: return "Recip";
        case OpKind::Add: return "Add";
        case OpKind::Mul: return "Mul";
        case OpKind::Mod: return "Mod";
        case OpKind::LessThan: return "LessThan";
        case OpKind::SumReduce: return "SumReduce";
        case OpKind::MaxReduce: return "MaxReduce";
        case OpKind::Iota: return "Iota";
        case OpKind::Gather: return "Gather";
        case OpKind::Scatter: return "Scatter";
        case OpKind::Cast: return "Cast";
        case OpKind::Custom: return "Custom";
    }
    return "?";
}

constexpr bool is_unary(OpKind k) { return k >= OpKind::Log2 && k <= OpKind::Recip; }
constexpr bool is_binary(OpKind k) { return k >= OpKind::Add && k <= OpKind::LessThan; }
constexpr bool is_reduce(OpKind k) { return k == OpKind::SumReduce || k == OpKind::MaxReduce; }

// Arithmetic of one element of an elementwise primitive, in flops, as a
// vectorised lane computes it (a transcendental as its range reduction and
// polynomial). The cost model charges it per element, so that recomputing a sin
// for every element of a broadcast, rather than once at its own size, is not free.
constexpr double elementwise_flops(OpKind k) {
    switch (k) {
        case OpKind::Sin: case OpKind::Log2: return 24;
        case OpKind::Exp2: return 12;
        case OpKind::Sqrt: case OpKind::Recip: case OpKind::Mod: return 8;
        case OpKind::Constant: return 0;
        default: return 1;
    }
}

// An op with its attributes; which fields matter depends on the kind.
struct Op {
    OpKind kind;
    std::size_t axis = 0;  // SumReduce, MaxReduce
    double value = 0;      // Constant
    Expression iota;       // Iota
    std::string label;     // Input
    std::shared_ptr<const OpPayload> payload;  // Custom

    explicit Op(OpKind k) : kind(k) {}
    static Op reduce(OpKind k, std::size_t axis) {
        Op op(k);
        op.axis = axis;
        return op;
    }
    static Op constant(double value) {
        Op op(OpKind::Constant);
        op.value = value;
        return op;
    }
    static Op index_expression(Expression e) {
        Op op(OpKind::Iota);
        op.iota = e;
        return op;
    }
    static Op input(std::string label) {
        Op op(OpKind::Input);
        op.label = std::move(label);
        return op;
    }
    template <BackendOpType T>
    static Op custom(T payload) {
        Op op(OpKind::Custom);
        op.payload = std::make_shared<PayloadOf<T>>(std::move(payload));
        return op;
    }
    // The op's symbol: the primitive's, or the declared op's.
    OpSymbol symbol() const { return payload ? payload->symbol() : static_cast<OpSymbol>(kind); }
    std::string_view name() const { return payload ? payload->name() : name_of(kind); }
    template <BackendOpType T>
    const T* payload_as() const { return payload ? payload->as<T>() : nullptr; }

    // Constants compare by bit pattern, so NaN equals itself (and -0 differs
    // from 0): an op must equal itself for hash-consing.
    friend bool operator==(const Op& a, const Op& b) {
        return a.kind == b.kind && a.axis == b.axis && std::bit_cast<std::uint64_t>(a.value) == std::bit_cast<std::uint64_t>(b.value) &&
               a.iota == b.iota && a.label == b.label &&
               (a.payload == b.payload || (a.payload && b.payload && a.payload->equals(*b.payload)));
    }
};

}  // namespace luminal

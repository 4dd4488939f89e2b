#pragma once
// An index Expression (Iota) compiled for evaluation over a block of element
// indices at once: the expression DAG becomes a list of instructions, each
// writing one register of block length, so the tree is walked once per block
// rather than once per element. Semantics are Expression::eval's (floor
// division and modulo, comparisons yield 0/1, division by zero is an error).
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "luminal/shape/expression.hpp"

namespace luminal::cpu {

namespace index_detail {

// Floor quotients (or moduli) of a block by one divisor d > 0 without a
// hardware divide per element: for |a|, d <= 2^50 the truncated product with the
// double reciprocal is within one of floor(a / d) (its error is below 1 / (4d)),
// and one correction step on the remainder makes it exact. Larger ones take
// the exact integer path.
template <bool Quotient>
void divide_by_positive(const std::int64_t* a, std::int64_t d, std::int64_t len, std::int64_t* r) {
    constexpr std::uint64_t kLimit = std::uint64_t{1} << 50;
    bool in_range = static_cast<std::uint64_t>(d) <= kLimit;
    for (std::int64_t j = 0; j < len; ++j) in_range &= static_cast<std::uint64_t>(a[j]) + kLimit <= 2 * kLimit;
    if (!in_range) {
        for (std::int64_t j = 0; j < len; ++j) r[j] = Quotient ? detail::floor_div(a[j], d) : detail::floor_mod(a[j], d);
        return;
    }
    const double inverse = 1.0 / static_cast<double>(d);
    for (std::int64_t j = 0; j < len; ++j) {
        std::int64_t q = static_cast<std::int64_t>(static_cast<double>(a[j]) * inverse);
        std::int64_t rem = a[j] - q * d;
        const bool under = rem < 0;
        q -= under;
        rem += under ? d : 0;
        const bool over = rem >= d;
        q += over;
        rem -= over ? d : 0;
        r[j] = Quotient ? q : rem;
    }
}

}  // namespace index_detail

class BlockExpr {
public:
    BlockExpr() = default;
    // Binds the dimensions of `dims` now; an unset dimension throws as
    // Expression::eval does.
    BlockExpr(const Expression& expr, const DynMap& dims) {
        std::unordered_map<const detail::ExprNode*, int> reg;
        result_ = compile(expr.bind(dims).node(), dims, reg);
    }

    // out[j] = expr evaluated at index start + j, for j < len (len <= block).
    void eval(std::int64_t start, std::int64_t len, std::int64_t* out, std::vector<std::int64_t>& scratch) const {
        std::size_t block = static_cast<std::size_t>(len);
        if (scratch.size() < instrs_.size() * block) scratch.resize(instrs_.size() * block);
        for (std::size_t k = 0; k < instrs_.size(); ++k) {
            const Instr& in = instrs_[k];
            std::int64_t* r = scratch.data() + k * block;
            const std::int64_t* a = in.a >= 0 ? scratch.data() + in.a * block : nullptr;
            const std::int64_t* b = in.b >= 0 ? scratch.data() + in.b * block : nullptr;
            run(in, start, len, a, b, r);
        }
        std::copy_n(scratch.data() + static_cast<std::size_t>(result_) * block, len, out);
    }

private:
    struct Instr {
        ExprOp op;
        int a = -1, b = -1;
        std::int64_t value = 0;  // Num (and Var, already bound); for Div and Mod, a constant divisor > 0 or 0
    };

    int compile(const detail::ExprNode* e, const DynMap& dims, std::unordered_map<const detail::ExprNode*, int>& reg) {
        if (auto it = reg.find(e); it != reg.end()) return it->second;
        Instr in{e->op};
        if (e->op == ExprOp::Num) in.value = e->value;
        else if (e->op == ExprOp::Var) in.op = ExprOp::Num, in.value = dims.at(e->var);
        else if (e->op != ExprOp::Index) in.a = compile(e->a, dims, reg), in.b = compile(e->b, dims, reg);
        if ((in.op == ExprOp::Div || in.op == ExprOp::Mod) && instrs_[in.b].op == ExprOp::Num && instrs_[in.b].value > 0)
            in.value = instrs_[in.b].value;
        instrs_.push_back(in);
        int id = static_cast<int>(instrs_.size() - 1);
        reg.emplace(e, id);
        return id;
    }

    static void run(const Instr& in, std::int64_t start, std::int64_t len, const std::int64_t* a, const std::int64_t* b,
                    std::int64_t* r) {
        switch (in.op) {
            case ExprOp::Num: std::fill(r, r + len, in.value); return;
            case ExprOp::Index:
                for (std::int64_t j = 0; j < len; ++j) r[j] = start + j;
                return;
            case ExprOp::Add:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] + b[j];
                return;
            case ExprOp::Mul:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] * b[j];
                return;
            case ExprOp::Div:
                if (in.value > 0) return index_detail::divide_by_positive<true>(a, in.value, len, r);
                check(std::find(b, b + len, 0) == b + len, "Expression::eval", "division by zero");
                for (std::int64_t j = 0; j < len; ++j) r[j] = detail::floor_div(a[j], b[j]);
                return;
            case ExprOp::Mod:
                if (in.value > 0) return index_detail::divide_by_positive<false>(a, in.value, len, r);
                check(std::find(b, b + len, 0) == b + len, "Expression::eval", "modulo by zero");
                for (std::int64_t j = 0; j < len; ++j) r[j] = detail::floor_mod(a[j], b[j]);
                return;
            case ExprOp::Min:
                for (std::int64_t j = 0; j < len; ++j) r[j] = std::min(a[j], b[j]);
                return;
            case ExprOp::Max:
                for (std::int64_t j = 0; j < len; ++j) r[j] = std::max(a[j], b[j]);
                return;
            case ExprOp::Lt:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] < b[j];
                return;
            case ExprOp::Eq:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] == b[j];
                return;
            case ExprOp::And:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] != 0 && b[j] != 0;
                return;
            case ExprOp::Or:
                for (std::int64_t j = 0; j < len; ++j) r[j] = a[j] != 0 || b[j] != 0;
                return;
            case ExprOp::Var: return;  // bound at compile time
        }
    }

    std::vector<Instr> instrs_;
    int result_ = 0;
};

}  // namespace luminal::cpu

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
        std::int64_t value = 0;  // Num (and Var, already bound)
    };

    int compile(const detail::ExprNode* e, const DynMap& dims, std::unordered_map<const detail::ExprNode*, int>& reg) {
        if (auto it = reg.find(e); it != reg.end()) return it->second;
        Instr in{e->op};
        if (e->op == ExprOp::Num) in.value = e->value;
        else if (e->op == ExprOp::Var) in.op = ExprOp::Num, in.value = dims.at(e->var);
        else if (e->op != ExprOp::Index) in.a = compile(e->a, dims, reg), in.b = compile(e->b, dims, reg);
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
                for (std::int64_t j = 0; j < len; ++j) {
                    check(b[j] != 0, "Expression::eval", "division by zero");
                    r[j] = detail::floor_div(a[j], b[j]);
                }
                return;
            case ExprOp::Mod:
                for (std::int64_t j = 0; j < len; ++j) {
                    check(b[j] != 0, "Expression::eval", "modulo by zero");
                    r[j] = detail::floor_mod(a[j], b[j]);
                }
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

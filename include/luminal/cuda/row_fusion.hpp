#pragma once
// Growing a cuda.Row from an elementwise result: an input the result reads
// broadcast along its last axis (one value per row) becomes a stage of the
// row kernel when its class holds a fold over that same row (a Reduce over
// the last axis of tensors in the result's index space) or a per-row
// elementwise region. Absorbing repeats until no such input is left, so
// softmax (max, sum of exponentials, its reciprocal) and RMSNorm (mean
// square, rsqrt) each become one kernel.
#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "luminal/cuda/reduce_op.hpp"
#include "luminal/cuda/row_op.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph::row_detail {

inline constexpr std::size_t kMaxRowStages = 8;

using cuda::RowOperand;
using cuda::RowStage;

// Reads the same positions: equal dims, index and validity.
inline bool same_reads(const ShapeTracker& a, const ShapeTracker& b) {
    return a.dims() == b.dims() && a.index_expression() == b.index_expression() && a.valid_expression() == b.valid_expression();
}

// A Row being grown: the node's inputs as (class, view) pairs in the result's index space.
struct RowDraft {
    Shape shape;
    DType dtype = DType::F32;
    std::vector<ClassId> children;
    std::vector<ShapeTracker> views;
    cuda::RowOp op;

    Shape outer() const { return Shape(shape.begin(), shape.end() - 1); }
    // How an input holding one value per row is read at each element.
    ShapeTracker row_broadcast() const { return ShapeTracker(outer()).expand_dim(shape.size() - 1, shape.back()); }

    RowOperand input(ClassId c, const ShapeTracker& v) {
        for (std::size_t i = 0; i < children.size(); ++i)
            if (children[i] == c && views[i] == v) return {RowOperand::Kind::Input, static_cast<std::uint16_t>(i)};
        children.push_back(c);
        views.push_back(v);
        return {RowOperand::Kind::Input, static_cast<std::uint16_t>(children.size() - 1)};
    }

    template <typename F>
    void for_each_operand(F&& f) {
        for (RowStage& s : op.stages)
            for (RowOperand& r : s.operands) f(r);
        for (RowOperand& r : op.operands) f(r);
    }

    // Input t becomes `stage`, which runs first; reads of t read its value.
    void absorb(std::size_t t, RowStage stage) {
        op.stages.insert(op.stages.begin(), std::move(stage));
        bool first = true;
        for (RowStage& s : op.stages) {
            for (RowOperand& r : s.operands) renumber(r, t, first);
            first = false;
        }
        for (RowOperand& r : op.operands) renumber(r, t, false);
        children.erase(children.begin() + static_cast<std::ptrdiff_t>(t));
        views.erase(views.begin() + static_cast<std::ptrdiff_t>(t));
        merge_equal_stages();
    }

private:
    static void renumber(RowOperand& r, std::size_t t, bool in_new_stage) {
        if (r.kind == RowOperand::Kind::Stage) {
            if (!in_new_stage) ++r.index;
        } else if (r.index == t) {
            r = {RowOperand::Kind::Stage, 0};
        } else if (r.index > t) {
            --r.index;
        }
    }

    // Two orders of absorbing can compute a value twice; the later copy reads the earlier.
    void merge_equal_stages() {
        for (std::size_t j = 1; j < op.stages.size(); ++j)
            for (std::size_t i = 0; i < j; ++i) {
                if (!(op.stages[i] == op.stages[j])) continue;
                op.stages.erase(op.stages.begin() + static_cast<std::ptrdiff_t>(j));
                for_each_operand([&](RowOperand& r) {
                    if (r.kind != RowOperand::Kind::Stage) return;
                    if (r.index == j) r.index = static_cast<std::uint16_t>(i);
                    else if (r.index > j) --r.index;
                });
                merge_equal_stages();
                return;
            }
    }
};

// A per-row region's program with its index expressions over the row's
// elements: the region's element o is the row z / length.
inline std::shared_ptr<const FusedProgram> in_row_index_space(const std::shared_ptr<const FusedProgram>& program,
                                                              const Expression& length) {
    auto moved = std::make_shared<FusedProgram>(*program);
    for (FusedStep& step : moved->steps)
        if (step.kind == OpKind::Iota) step.iota = step.iota.substitute_index(Expression::index() / length);
    return moved;
}

// The stage node n of input t's class computes, if it is a fold over the row
// or a per-row region; its own inputs join `row`.
inline std::optional<RowStage> stage_of(const EGraph& g, const HlirContext& ctx, RowDraft& row, ENodeId n) {
    const std::size_t last = row.shape.size() - 1;
    const NodeSpec s = ctx.spec(g, n);  // a copy: the draft's inputs may be added while it is read
    auto kids = g.children(n);
    RowStage stage;
    stage.dtype = s.dtype;
    if (auto* region = s.payload_as<FusedElementwiseOp>()) {
        if (!(product(s.shape) == product(row.outer())) || region->program->steps.size() > kMaxFusedSteps) return std::nullopt;
        stage.folds = false;
        stage.program = in_row_index_space(region->program, row.shape.back());
        for (std::size_t k = 0; k < kids.size(); ++k) {
            // The region's element o is row o: its inputs read in the row's outer dims, once per row.
            auto per_row = s.shape == row.outer() ? std::optional(s.views[k]) : s.views[k].reshape(row.outer());
            if (!per_row) return std::nullopt;
            stage.operands.push_back(row.input(g.find(kids[k]), per_row->expand_dim(last, row.shape.back())));
        }
        return stage;
    }
    if (auto* r = s.payload_as<cuda::ReduceOp>()) {
        if (r->axis != last) return std::nullopt;
        stage.fold = r->fold, stage.program = r->prologue;
    } else if (!s.op.payload && (s.kind == sym(OpKind::SumReduce) || s.kind == sym(OpKind::MaxReduce)) && s.op.axis == last) {
        stage.fold = static_cast<OpKind>(s.kind);
    } else {
        return std::nullopt;
    }
    for (std::size_t k = 0; k < kids.size(); ++k) {
        if (s.views[k].dims() != row.shape) return std::nullopt;
        stage.operands.push_back(row.input(g.find(kids[k]), s.views[k]));
    }
    return stage;
}

// The best stage for input t: the node of its class adding the fewest new
// inputs, then the one computing the most inside the kernel.
inline std::optional<RowDraft> absorbed(const EGraph& g, const HlirContext& ctx, const RowDraft& row, std::size_t t) {
    const ClassId c = row.children[t];
    std::optional<RowDraft> best;
    std::tuple<std::size_t, std::size_t> best_score{};
    for (ENodeId n : g.class_nodes(c)) {
        if (!g.alive(n)) continue;
        RowDraft trial = row;
        auto stage = stage_of(g, ctx, trial, n);
        if (!stage) continue;
        bool cycle = false;
        for (const RowOperand& r : stage->operands) cycle |= trial.children[r.index] == c;
        if (cycle) continue;
        const std::size_t added = trial.children.size() - row.children.size();
        const std::size_t computed = stage->program ? stage->program->steps.size() : 0;
        const std::tuple<std::size_t, std::size_t> score{added, kMaxFusedSteps - std::min(computed, kMaxFusedSteps)};
        if (best && score >= best_score) continue;
        trial.absorb(t, std::move(*stage));
        best = std::move(trial);
        best_score = score;
    }
    return best;
}

// Absorbs every per-row input it can; false when none was.
inline bool grow(const EGraph& g, const HlirContext& ctx, RowDraft& row) {
    bool grew = false;
    for (bool again = true; again && row.op.stages.size() < kMaxRowStages;) {
        again = false;
        const ShapeTracker broadcast = row.row_broadcast();
        for (std::size_t t = 0; t < row.children.size(); ++t) {
            if (!same_reads(row.views[t], broadcast)) continue;
            auto trial = absorbed(g, ctx, row, t);
            if (!trial || trial->children.empty() || trial->children.size() > kMaxFusedInputs) continue;
            row = std::move(*trial);
            grew = again = true;
            break;
        }
    }
    return grew;
}

inline void add_row(EGraph& g, HlirContext& ctx, ClassId root, const RowDraft& row) {
    g.merge(root, add_spec(g, ctx, NodeSpec::backend(row.op, row.views, row.shape, row.dtype), row.children));
}

}  // namespace luminal::egraph::row_detail

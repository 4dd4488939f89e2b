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
#include <utility>
#include <unordered_map>
#include <vector>

#include "luminal/cuda/reduce_op.hpp"
#include "luminal/cuda/row_op.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph::row_detail {

inline constexpr std::size_t kMaxRowStages = 8;

using cuda::RowOperand;
using cuda::RowStage;

// A view with its index and validity at hand: rows test every input of every
// region they meet against one broadcast, most of them equal to it or of
// other dims, which is settled before any expression is looked at.
struct Reads {
    ShapeTracker view;
    Expression index, valid;
    explicit Reads(ShapeTracker v) : view(std::move(v)), index(view.index_expression()), valid(view.valid_expression()) {}

    // Whether `v` reads the same positions: equal dims, index and validity.
    bool same_as(const ShapeTracker& v) const {
        if (v == view) return true;
        if (v.rank() != view.rank()) return false;
        for (std::size_t i = 0; i < v.rank(); ++i)
            if (!(v.axes()[i].size == view.axes()[i].size)) return false;
        return v.index_expression() == index && v.valid_expression() == valid;
    }
    bool read_by_any(const std::vector<ShapeTracker>& views) const {
        return std::any_of(views.begin(), views.end(), [&](const ShapeTracker& v) { return same_as(v); });
    }
};

// A Row being grown: the node's inputs as (class, view) pairs in the result's index space.
struct RowDraft {
    Shape shape;
    DType dtype = DType::F32;
    std::vector<ClassId> children;
    std::vector<ShapeTracker> views;
    cuda::RowOp op;

    Shape outer() const { return Shape(shape.begin(), shape.end() - 1); }

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

// How an input holding one value per row of `shape` is read at each element.
// Remembered per shape (interned expressions live as long as the process):
// every region and row of a shape asks again, and building it each time was much of the row rules' time.
inline const Reads& row_broadcast(const Shape& shape) {
    struct ShapeHash {
        std::size_t operator()(const Shape& s) const {
            std::size_t h = s.size();
            for (const Expression& e : s) h = h * 0x9E3779B97F4A7C15ull ^ e.hash();
            return h;
        }
    };
    thread_local std::unordered_map<Shape, Reads, ShapeHash> known;
    auto it = known.find(shape);
    if (it == known.end())
        it = known.emplace(shape, Reads(ShapeTracker(Shape(shape.begin(), shape.end() - 1)).expand_dim(shape.size() - 1, shape.back())))
                 .first;
    return it->second;
}

// What per_row_view remembers a view by, and the question as asked (looked
// up without copying its view and shape).
struct PerRowKey {
    ShapeTracker view;
    bool reshape;
    Shape row_shape;
};
struct PerRowProbe {
    const ShapeTracker& view;
    bool reshape;
    const Shape& row_shape;
};
struct PerRowHash {
    using is_transparent = void;
    template <typename K>
    std::size_t operator()(const K& k) const {
        std::size_t h = k.view.hash() ^ static_cast<std::size_t>(k.reshape);
        for (const Expression& e : k.row_shape) h = h * 0x9E3779B97F4A7C15ull ^ e.hash();
        return h;
    }
};
struct PerRowEqual {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
        return a.reshape == b.reshape && a.row_shape == b.row_shape && a.view == b.view;
    }
};

// How a per-row region's input read through `view` is read in the index
// space of a row of `row_shape`, once per row: `view` reshaped to the row's
// outer dims (where the region's own shape is not already those, `reshape`),
// then broadcast along the row; nullopt where the view has no such reshape.
// Remembered as row_broadcast is: every row that meets a region asks again
// for the same views, and building them was most of the row rules' time.
inline const std::optional<ShapeTracker>& per_row_view(const ShapeTracker& view, bool reshape, const Shape& row_shape) {
    thread_local std::unordered_map<PerRowKey, std::optional<ShapeTracker>, PerRowHash, PerRowEqual> known;
    if (auto it = known.find(PerRowProbe{view, reshape, row_shape}); it != known.end()) return it->second;
    const std::size_t last = row_shape.size() - 1;
    std::optional<ShapeTracker> read = reshape ? view.reshape(Shape(row_shape.begin(), row_shape.end() - 1)) : view;
    if (read) read = read->expand_dim(last, row_shape.back());
    return known.emplace(PerRowKey{view, reshape, row_shape}, std::move(read)).first->second;
}

// A per-row region's program with its index expressions over the row's
// elements: the region's element o is the row z / length.
inline std::shared_ptr<const FusedProgram> in_row_index_space(const std::shared_ptr<const FusedProgram>& program,
                                                              const Expression& length) {
    auto moved = std::make_shared<FusedProgram>(*program);
    for (FusedStep& step : moved->steps)
        if (step.kind == OpKind::Iota) step.iota = step.iota.substitute_index(Expression::index() / length);
    return moved;
}

// Whether a node of spec s can be a stage of `row` as far as its op and
// shape tell (`rows`: product(row.outer())). stage_of reads only nodes that
// can, so that the others are passed over without copying the draft.
inline bool may_stage(const NodeSpec& s, const RowDraft& row, const Expression& rows) {
    const std::size_t last = row.shape.size() - 1;
    if (s.kind == op_symbol<FusedElementwiseOp>)
        return product(s.shape) == rows && s.payload_as<FusedElementwiseOp>()->program->steps.size() <= kMaxFusedSteps;
    if (s.kind == op_symbol<cuda::ReduceOp>) return s.payload_as<cuda::ReduceOp>()->axis == last;
    return !s.op.payload && (s.kind == sym(OpKind::SumReduce) || s.kind == sym(OpKind::MaxReduce)) && s.op.axis == last;
}

// Whether e-node n's op is one may_stage can accept, read from the e-node's
// own record: most nodes of a class are passed over without reading their spec.
inline bool stage_op(const EGraph& g, ENodeId n) {
    const Symbol op = g.node(n).op;
    return op == op_symbol<FusedElementwiseOp> || op == op_symbol<cuda::ReduceOp> || op == sym(OpKind::SumReduce) ||
           op == sym(OpKind::MaxReduce);
}

// What the stage node n of input t's class computes (a node may_stage
// accepts) reads: its inputs' classes and views in the row's index space,
// into `reads` (a buffer reused from node to node); false where a view has
// none. The views are the spec's own or per_row_view's, valid while nothing
// is added to the e-graph: candidates are compared without copying them.
using StageReads = std::vector<std::pair<ClassId, const ShapeTracker*>>;
inline bool stage_reads(const EGraph& g, const HlirContext& ctx, const RowDraft& row, ENodeId n, StageReads& reads) {
    const NodeSpec& s = ctx.spec(g, n);
    auto kids = g.children(n);
    reads.clear();
    if (s.payload_as<FusedElementwiseOp>()) {
        // The region's element o is row o: its inputs read in the row's outer dims, once per row.
        const bool reshape = !std::equal(s.shape.begin(), s.shape.end(), row.shape.begin(), row.shape.end() - 1);
        for (std::size_t k = 0; k < kids.size(); ++k) {
            const std::optional<ShapeTracker>& per_row = per_row_view(s.views[k], reshape, row.shape);
            if (!per_row) return false;
            reads.emplace_back(g.find(kids[k]), &*per_row);
        }
        return true;
    }
    for (std::size_t k = 0; k < kids.size(); ++k) {
        // The view's dims compared in place, without building them: this runs for every candidate stage.
        const auto& axes = s.views[k].axes();
        if (!std::equal(axes.begin(), axes.end(), row.shape.begin(), row.shape.end(),
                        [](const ShapeTracker::Axis& a, const Expression& d) { return a.size == d; }))
            return false;
        reads.emplace_back(g.find(kids[k]), &s.views[k]);
    }
    return true;
}

// The stage node n computes: a fold over the row or a per-row region, reading `reads` (stage_reads'), which join `row`.
inline RowStage stage_of(const EGraph& g, const HlirContext& ctx, RowDraft& row, ENodeId n, const StageReads& reads) {
    const NodeSpec& s = ctx.spec(g, n);
    RowStage stage;
    stage.dtype = s.dtype;
    if (auto* region = s.payload_as<FusedElementwiseOp>()) {
        stage.folds = false;
        stage.program = in_row_index_space(region->program, row.shape.back());
    } else if (auto* r = s.payload_as<cuda::ReduceOp>()) {
        stage.fold = r->fold, stage.program = r->prologue;
    } else {
        stage.fold = static_cast<OpKind>(s.kind);
    }
    for (const auto& [c, v] : reads) stage.operands.push_back(row.input(c, *v));
    return stage;
}

// The best stage for input t: the node of its class adding the fewest new
// inputs, then the one computing the most inside the kernel. Candidates are
// scored from what they read; only the best is built into a draft. `rows`
// is product(row.outer()).
inline std::optional<RowDraft> absorbed(const EGraph& g, const HlirContext& ctx, const RowDraft& row, const Expression& rows,
                                        std::size_t t) {
    const ClassId c = row.children[t];
    std::optional<ENodeId> best;
    StageReads reads, best_reads;
    std::tuple<std::size_t, std::size_t> best_score{};
    for (ENodeId n : g.class_nodes(c)) {
        if (!g.alive(n) || !stage_op(g, n)) continue;
        const NodeSpec& s = ctx.spec(g, n);
        if (!may_stage(s, row, rows)) continue;
        if (!stage_reads(g, ctx, row, n, reads) || std::any_of(reads.begin(), reads.end(), [&](const auto& r) { return r.first == c; }))
            continue;
        std::size_t added = 0;  // the reads the draft does not have yet, each counted once
        for (std::size_t i = 0; i < reads.size(); ++i) {
            auto same = [&](ClassId k, const ShapeTracker& v) { return k == reads[i].first && v == *reads[i].second; };
            bool known = false;
            for (std::size_t j = 0; j < row.children.size() && !known; ++j) known = same(row.children[j], row.views[j]);
            for (std::size_t j = 0; j < i && !known; ++j) known = same(reads[j].first, *reads[j].second);
            added += !known;
        }
        std::size_t computed = 0;
        if (auto* region = s.payload_as<FusedElementwiseOp>()) computed = region->program->steps.size();
        else if (auto* r = s.payload_as<cuda::ReduceOp>(); r && r->prologue) computed = r->prologue->steps.size();
        const std::tuple<std::size_t, std::size_t> score{added, kMaxFusedSteps - std::min(computed, kMaxFusedSteps)};
        if (best && score >= best_score) continue;
        best = n;
        std::swap(best_reads, reads);
        best_score = score;
    }
    if (!best) return std::nullopt;
    RowDraft out = row;
    RowStage stage = stage_of(g, ctx, out, *best, best_reads);
    out.absorb(t, std::move(stage));
    return out;
}

// Absorbs every per-row input it can; false when none was. `broadcast` is row_broadcast(row.shape).
inline bool grow(const EGraph& g, const HlirContext& ctx, RowDraft& row, const Reads& broadcast) {
    bool grew = false;
    const Expression rows = product(row.outer());
    // Classes with no node to stage: that depends on the class and the row's shape alone, so they are not searched again.
    std::vector<ClassId> no_stage;
    for (bool again = true; again && row.op.stages.size() < kMaxRowStages;) {
        again = false;
        for (std::size_t t = 0; t < row.children.size(); ++t) {
            if (!broadcast.same_as(row.views[t]) || std::find(no_stage.begin(), no_stage.end(), row.children[t]) != no_stage.end())
                continue;
            auto trial = absorbed(g, ctx, row, rows, t);
            if (!trial) no_stage.push_back(row.children[t]);
            if (!trial || trial->children.empty() || trial->children.size() > kMaxFusedInputs) continue;
            row = std::move(*trial);
            grew = again = true;
            break;
        }
    }
    return grew;
}

// How a consumer ranks a class's row ops, lowest first: the one that leaves the fewest of its inputs to
// other launches (inputs deeper than bound data: an input, a constant, an iota), then the one that
// hoists the most per-row work.
inline std::pair<std::size_t, std::size_t> consumer_rank(const EGraph& g, const HlirContext& ctx, ENodeId row) {
    std::size_t computed = 0;
    for (ClassId c : g.children(row)) computed += ctx.facts(g, c).depth > 0;
    const std::size_t stages = ctx.spec(g, row).payload_as<cuda::RowOp>()->stages.size();
    return {computed, kMaxRowStages - std::min(stages, kMaxRowStages)};
}

inline void add_row(EGraph& g, HlirContext& ctx, ClassId root, const RowDraft& row) {
    g.merge(root, add_spec(g, ctx, NodeSpec::backend(row.op, row.views, row.shape, row.dtype), row.children));
}

}  // namespace luminal::egraph::row_detail

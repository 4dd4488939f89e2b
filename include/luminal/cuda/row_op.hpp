#pragma once
// cuda.Row: one kernel per row of the last axis for a result that reads
// per-row values of the same row (softmax's max and sum, RMSNorm's mean
// square): each row's stages run in order, a fold over the row or a
// per-row expression, then the element program writes the row. Every
// operand read through the node's views is in the result's index space, so
// x is read once per stage from cache and no per-row tensor is written.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/graph/backend_op.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/runtime/reference_reduce.hpp"

namespace luminal::cuda {

// What a program slot reads: the node's input `index` (through its view) or stage `index`'s per-row value.
struct RowOperand {
    enum class Kind : std::uint8_t { Input, Stage } kind = Kind::Input;
    std::uint16_t index = 0;
    friend bool operator==(const RowOperand&, const RowOperand&) = default;
};

inline bool same_program(const std::shared_ptr<const FusedProgram>& a, const std::shared_ptr<const FusedProgram>& b) {
    return a == b || (a && b && *a == *b);
}

// A per-row value: `fold` over the row of `program` (of operand 0 when it is
// null), or, when it does not fold, `program` evaluated once per row.
struct RowStage {
    bool folds = true;
    OpKind fold = OpKind::SumReduce;
    DType dtype = DType::F32;  // the value is rounded to it, as the separate node's result was
    std::shared_ptr<const FusedProgram> program;
    std::vector<RowOperand> operands;

    bool operator==(const RowStage& o) const {
        return folds == o.folds && fold == o.fold && dtype == o.dtype && operands == o.operands && same_program(program, o.program);
    }
};

struct RowOp {
    static constexpr std::string_view name = "cuda.Row";
    std::vector<RowStage> stages;
    std::shared_ptr<const FusedProgram> program;  // the element result
    std::vector<RowOperand> operands;
    ReduceStrategy strategy = ReduceStrategy::BlockPerOutput;  // a warp or a block per row

    bool operator==(const RowOp& o) const {
        return stages == o.stages && operands == o.operands && strategy == o.strategy && same_program(program, o.program);
    }
    std::size_t hash() const {
        auto mix = [](std::size_t h, std::size_t v) { return (h ^ v) * 0x100000001B3ull; };
        auto mix_operands = [&](std::size_t h, const std::vector<RowOperand>& ops) {
            for (const RowOperand& r : ops) h = mix(h, static_cast<std::size_t>(r.kind) << 16 | r.index);
            return h;
        };
        std::size_t h = mix(0x70A5u, static_cast<std::size_t>(strategy));
        for (const RowStage& s : stages) {
            h = mix(h, (static_cast<std::size_t>(s.folds) << 16) | (static_cast<std::size_t>(s.fold) << 8) | static_cast<std::size_t>(s.dtype));
            if (s.program) h = mix(h, FusedElementwiseOp{s.program}.hash());
            h = mix_operands(h, s.operands);
        }
        return mix_operands(mix(h, FusedElementwiseOp{program}.hash()), operands);
    }
    std::string attributes() const {
        std::string text = fmt::format("{} per row, stages:", name_of(strategy));
        for (const RowStage& s : stages) text += s.folds ? fmt::format(" {}", name_of(s.fold)) : std::string(" scalar");
        return text + fmt::format(", element steps={}", program->steps.size());
    }
    DType dtype(std::span<const DType>) const { return program->steps.back().dtype; }
    double flops(const OpCostQuery& q) const {
        double steps = static_cast<double>(program->steps.size());
        for (const RowStage& s : stages) steps += s.program ? static_cast<double>(s.program->steps.size()) + 1 : 1;
        return q.elements(q.shape) * steps;
    }

    // The stages as the separate nodes computed them: each fold a reduction
    // over the last axis, each per-row expression an elementwise program.
    void reference(const ReferenceCall& call) const {
        const std::size_t rank = call.inputs[0].rank();
        Shape dims, outer;
        for (std::size_t a = 0; a < rank; ++a) dims.push_back(Expression(call.inputs[0].dim(a)));
        outer.assign(dims.begin(), dims.end() - 1);
        const std::size_t elements = call.out.size();
        std::vector<HostBuffer> values;  // reserved: the readers of earlier stages point into it
        values.reserve(stages.size());
        std::vector<ShapeTracker> views;
        auto operand_inputs = [&](const std::vector<RowOperand>& ops) {
            std::vector<ReferenceInput> in;
            for (const RowOperand& r : ops)
                in.push_back(r.kind == RowOperand::Kind::Input ? call.inputs[r.index]
                                                               : ReferenceInput(values[r.index], views[r.index], call.dims, call.node));
            return in;
        };
        for (const RowStage& s : stages) {
            const std::vector<ReferenceInput> in = operand_inputs(s.operands);
            if (!s.folds) {
                values.emplace_back(s.dtype, elements);
                FusedElementwiseOp{s.program}.reference(ReferenceCall{in, values.back(), call.dims, call.node});
                views.push_back(ShapeTracker(dims));
                continue;
            }
            HostBuffer folded(s.dtype, elements / std::max<std::size_t>(static_cast<std::size_t>(call.inputs[0].dim(rank - 1)), 1));
            if (s.program) {
                HostBuffer terms(s.program->steps.back().dtype, elements);
                FusedElementwiseOp{s.program}.reference(ReferenceCall{in, terms, call.dims, call.node});
                reference_fold(s.fold, ReferenceInput(terms, ShapeTracker(dims), call.dims, call.node), rank - 1, folded);
            } else {
                reference_fold(s.fold, in[0], rank - 1, folded);
            }
            values.push_back(std::move(folded));
            views.push_back(ShapeTracker(outer).expand_dim(rank - 1, dims.back()));
        }
        const std::vector<ReferenceInput> in = operand_inputs(operands);
        FusedElementwiseOp{program}.reference(ReferenceCall{in, call.out, call.dims, call.node});
    }
};

}  // namespace luminal::cuda

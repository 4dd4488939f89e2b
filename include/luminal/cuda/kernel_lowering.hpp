#pragma once
// Program nodes as kernels (kernel_ir.hpp): every op a CUDA program can hold
// has a correct standalone kernel here, so any extraction runs. A fused region's
// steps map one-to-one to body steps; a Matmul is a reduction over k of a
// product read through broadcast views (one row per warp: the decode GEMV);
// a row op's stages and element program are each a body.
#include <optional>

#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/cuda/reduce_op.hpp"
#include "luminal/cuda/region_op.hpp"
#include "luminal/cuda/row_op.hpp"
#include "luminal/graph/program.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/lowering/matmul.hpp"

namespace luminal::cuda {

namespace lowering_detail {

// Kernel input k reads the node's input k: a Load through its view at the element.
inline Kernel elementwise_frame(const NodeSpec& spec, std::span<const DType> source_dtypes, std::uint32_t node) {
    Kernel k;
    k.inputs.assign(source_dtypes.begin(), source_dtypes.end());
    k.out = spec.dtype;
    k.count = product(spec.shape);
    k.node = node;
    return k;
}

inline std::uint16_t load(Body& body, const NodeSpec& spec, std::span<const DType> dtypes, std::uint16_t k,
                          std::int32_t at = kAtElement) {
    Step s;
    s.kind = StepKind::Load;
    s.dtype = dtypes[k];
    s.input = k;
    s.view = spec.views[k];
    s.at = at;
    return body.add(std::move(s));
}

inline Step op_step(StepKind kind, OpKind op, DType dtype, std::uint16_t a, std::uint16_t b = 0) {
    Step s;
    s.kind = kind;
    s.op = op;
    s.dtype = dtype;
    s.a = a;
    s.b = b;
    return s;
}

// The steps of `program` into `body`; its operand slots below the program's
// input count are the steps in `slot`.
inline void add_program(Body& body, const FusedProgram& program, std::vector<std::uint16_t> slot) {
    for (const FusedStep& f : program.steps) {
        Step s;
        s.dtype = f.dtype;
        switch (f.kind) {
            case OpKind::Constant: s.kind = StepKind::Constant, s.value = f.value; break;
            case OpKind::Iota: s.kind = StepKind::Index, s.index = f.iota; break;
            case OpKind::Cast: s = op_step(StepKind::Cast, OpKind::Cast, f.dtype, slot[f.a]); break;
            default:
                s = op_step(is_unary(f.kind) ? StepKind::Unary : StepKind::Binary, f.kind, f.dtype, slot[f.a],
                            is_binary(f.kind) ? slot[f.b] : 0);
        }
        slot.push_back(body.add(std::move(s)));
    }
}

// The steps of `program` over the node's inputs (each loaded at the element) into k's body.
inline void add_fused_steps(Kernel& k, const NodeSpec& spec, const FusedProgram& program, std::span<const DType> dtypes) {
    std::vector<std::uint16_t> slot;
    for (std::uint16_t i = 0; i < spec.views.size(); ++i) slot.push_back(load(k.body, spec, dtypes, i));
    add_program(k.body, program, std::move(slot));
}

inline Kernel fused_kernel(const NodeSpec& spec, const FusedProgram& program, std::span<const DType> dtypes,
                           std::uint32_t node) {
    Kernel k = elementwise_frame(spec, dtypes, node);
    add_fused_steps(k, spec, program, dtypes);
    return k;
}

// A reduction over `axis` of input 0 (its view), or of `prologue` computed
// from the inputs, folded with `fold`.
inline Kernel reduce_kernel(const NodeSpec& spec, OpKind fold, std::size_t axis, ReduceStrategy strategy,
                            std::span<const DType> dtypes, std::uint32_t node, const FusedProgram* prologue = nullptr) {
    Kernel k = elementwise_frame(spec, dtypes, node);
    k.shape = Kernel::Shape::Reduce;
    k.fold = fold;
    k.strategy = strategy;
    const Shape dims = spec.views[0].dims();
    k.extent = dims.at(axis);
    for (std::size_t a = axis + 1; a < dims.size(); ++a) k.inner = k.inner * dims[a];
    if (prologue) add_fused_steps(k, spec, *prologue, dtypes);
    else load(k.body, spec, dtypes, 0);
    return k;
}

// One thread group per row: each stage's body over its operands (inputs
// loaded at the element, earlier stages' values), then the element program.
inline Kernel row_kernel(const NodeSpec& spec, const RowOp& row, std::span<const DType> dtypes, std::uint32_t node) {
    Kernel k = elementwise_frame(spec, dtypes, node);
    k.shape = Kernel::Shape::Row;
    k.strategy = row.strategy;
    k.extent = spec.shape.back();
    auto operands = [&](Body& body, const std::vector<RowOperand>& ops) {
        std::vector<std::uint16_t> slot;
        for (const RowOperand& r : ops) {
            if (r.kind == RowOperand::Kind::Input) {
                slot.push_back(load(body, spec, dtypes, r.index));
                continue;
            }
            Step s;
            s.kind = StepKind::StageValue;
            s.dtype = row.stages[r.index].dtype;
            s.input = r.index;
            slot.push_back(body.add(std::move(s)));
        }
        return slot;
    };
    for (const RowStage& stage : row.stages) {
        RowStageKernel sk{stage.folds, stage.fold, stage.dtype, {}};
        auto slot = operands(sk.body, stage.operands);
        if (stage.program) add_program(sk.body, *stage.program, std::move(slot));
        k.stages.push_back(std::move(sk));
    }
    add_program(k.body, *row.program, operands(k.body, row.operands));
    return k;
}

// out[.., i, j] = sum_k a[.., i, k] * b[.., j, k] as a reduction over the
// virtual [.., m, n, k] product: a broadcast over j, b over i.
inline Kernel matmul_kernel(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t node) {
    Kernel k = elementwise_frame(spec, dtypes, node);
    k.shape = Kernel::Shape::Reduce;
    k.fold = OpKind::SumReduce;
    k.strategy = ReduceStrategy::WarpPerOutput;
    const ShapeTracker& a = spec.views[0];
    const ShapeTracker& b = spec.views[1];
    const std::size_t r = a.rank();
    check(r >= 2 && b.rank() == r, "cuda::matmul_kernel", "node {}: operands of rank {} and {}", node, r, b.rank());
    const Expression m = a.dim(r - 2), n = b.dim(r - 2);
    k.extent = a.dim(r - 1);
    NodeSpec virtual_spec = spec;
    virtual_spec.views = {a.expand_dim(r - 1, n), b.expand_dim(r - 2, m)};
    const DType wide = is_float(dtypes[0]) || is_float(dtypes[1]) ? DType::F32 : DType::I64;
    std::uint16_t x = load(k.body, virtual_spec, dtypes, 0), y = load(k.body, virtual_spec, dtypes, 1);
    if (k.body.steps[x].dtype != wide) x = k.body.add(op_step(StepKind::Cast, OpKind::Cast, wide, x));
    if (k.body.steps[y].dtype != wide) y = k.body.add(op_step(StepKind::Cast, OpKind::Cast, wide, y));
    k.body.add(op_step(StepKind::Binary, OpKind::Mul, wide, x, y));
    return k;
}

}  // namespace lowering_detail

// The kernel computing program node `spec` (number `node`) from buffers of
// `dtypes`, or nullopt for nodes that are not kernels (Input, Constant, Scatter,
// host ops).
inline std::optional<Kernel> kernel_for(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t node) {
    using namespace lowering_detail;
    if (spec.op.payload) {
        if (auto* fused = spec.payload_as<FusedElementwiseOp>()) return fused_kernel(spec, *fused->program, dtypes, node);
        if (auto* region = spec.payload_as<RegionOp>()) {
            Kernel k = elementwise_frame(spec, dtypes, node);
            k.body = region->body;
            return k;
        }
        if (spec.payload_as<MatmulOp>()) return matmul_kernel(spec, dtypes, node);
        if (auto* row = spec.payload_as<RowOp>()) return row_kernel(spec, *row, dtypes, node);
        if (auto* reduce = spec.payload_as<ReduceOp>())
            return reduce_kernel(spec, reduce->fold, reduce->axis, reduce->strategy, dtypes, node, reduce->prologue.get());
        return std::nullopt;
    }
    const auto kind = static_cast<OpKind>(spec.kind);
    Kernel k = elementwise_frame(spec, dtypes, node);
    if (is_unary(kind)) {
        check(is_float(dtypes[0]), name_of(kind).data(), "node {} needs a float input, got {}", node, name_of(dtypes[0]));
        k.body.add(op_step(StepKind::Unary, kind, spec.dtype, load(k.body, spec, dtypes, 0)));
    } else if (is_binary(kind)) {
        std::uint16_t x = load(k.body, spec, dtypes, 0), y = load(k.body, spec, dtypes, 1);
        k.body.add(op_step(StepKind::Binary, kind, spec.dtype, x, y));
    } else if (kind == OpKind::Cast || kind == OpKind::Output) {
        k.body.add(op_step(StepKind::Cast, OpKind::Cast, spec.dtype, load(k.body, spec, dtypes, 0)));
    } else if (kind == OpKind::Iota) {
        Step s;
        s.kind = StepKind::Index;
        s.dtype = spec.dtype;
        s.index = spec.op.iota;
        k.body.add(std::move(s));
    } else if (kind == OpKind::Gather) {
        std::uint16_t at = load(k.body, spec, dtypes, 1);
        k.body.add(op_step(StepKind::Cast, OpKind::Cast, spec.dtype, load(k.body, spec, dtypes, 0, at)));
    } else if (is_reduce(kind)) {
        return reduce_kernel(spec, kind, spec.op.axis, ReduceStrategy::ThreadPerOutput, dtypes, node);
    } else {
        return std::nullopt;
    }
    return k;
}

// Scatter node `spec`: the copy of dest into the output (dropped when the
// output already is dest's buffer) and the scatter of the source.
inline Kernel scatter_copy_kernel(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t node) {
    using namespace lowering_detail;
    Kernel k = elementwise_frame(spec, dtypes.first(1), node);
    k.body.add(op_step(StepKind::Cast, OpKind::Cast, spec.dtype, load(k.body, spec, dtypes, 0)));
    return k;
}

inline ScatterKernel scatter_kernel(const NodeSpec& spec, std::span<const DType> dtypes, std::uint32_t node) {
    ScatterKernel k;
    k.inputs = {dtypes[1], dtypes[2]};
    k.out = spec.dtype;
    k.indexes = spec.views[1];
    k.source = spec.views[2];
    k.count = spec.views[1].numel();
    k.out_count = product(spec.shape);
    k.node = node;
    return k;
}

}  // namespace luminal::cuda

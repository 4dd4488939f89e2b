#pragma once
// Runs kernel IR on the host, step by step as the printed CUDA computes it:
// values rounded to each step's dtype, reductions accumulated in f32 (floats)
// or wrapping int64, the same bounds checks. What it cannot show is what only
// a device has (warp shuffles, races, timing); the fold order it uses is the
// thread-per-output one.
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "luminal/core/host_buffer.hpp"
#include "luminal/cuda/kernel_ir.hpp"
#include "luminal/graph/primitive_semantics.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal::cuda {

struct KernelBuffers {
    std::span<const HostBuffer* const> inputs;
    HostBuffer& out;
    const DynMap& dims;
};

namespace interpreter_detail {

struct BoundLoad {
    Expression position, valid, numel;
};

class BodyRunner {
public:
    // `stages`: a Row kernel's per-row values, which StageValue steps read.
    BodyRunner(const Body& body, std::uint32_t node, const KernelBuffers& b, const std::vector<HostBuffer>* stages = nullptr)
        : body_(body), node_(node), buffers_(b), stages_(stages) {
        for (const Step& s : body.steps) {
            values_.emplace_back(s.dtype, 1);
            BoundLoad bound;
            if (s.kind == StepKind::Load)
                bound = {s.view.index_expression().bind(b.dims), s.view.valid_expression().bind(b.dims),
                         s.view.numel().bind(b.dims)};
            if (s.kind == StepKind::Index) bound.position = s.index.bind(b.dims);
            loads_.push_back(bound);
        }
    }

    // The body at element `element`; its result is values().back().
    void run(std::int64_t element) {
        const auto& steps = body_.steps;
        for (std::size_t j = 0; j < steps.size(); ++j) {
            const Step& s = steps[j];
            HostBuffer& v = values_[j];
            switch (s.kind) {
                case StepKind::Load: load(s, loads_[j], v, element); break;
                case StepKind::Constant: v.store_double(0, s.value); break;
                case StepKind::Index: v.store_int(0, loads_[j].position.eval(buffers_.dims, element)); break;
                case StepKind::Cast: v.copy_element(0, values_[s.a], 0); break;
                case StepKind::StageValue: v.copy_element(0, (*stages_)[s.input], 0); break;
                case StepKind::Masked:
                    if (values_[s.a].as_double(0) != 0) v.copy_element(0, values_[s.b], 0);
                    else v.store_int(0, 0);
                    break;
                case StepKind::Unary:
                case StepKind::Binary:
                    semantics::apply(s.op, values_[s.a], s.kind == StepKind::Binary ? &values_[s.b] : nullptr, v, 0,
                                     node_, element);
                    break;
            }
        }
    }
    const HostBuffer& result() const { return values_.back(); }
    const HostBuffer& value(std::size_t step) const { return values_[step]; }

private:
    void load(const Step& s, const BoundLoad& bound, HostBuffer& v, std::int64_t element) {
        std::int64_t index = element;
        if (s.at != kAtElement) {
            index = values_[static_cast<std::size_t>(s.at)].as_int(0);
            const std::int64_t n = bound.numel.eval(buffers_.dims);
            check(index >= 0 && index < n, "Gather", "node {}: index {} at position {} is out of range for {} elements",
                  node_, index, element, n);
        }
        if (bound.valid.eval(buffers_.dims, index) == 0) {
            v.store_int(0, 0);
            return;
        }
        const HostBuffer& in = *buffers_.inputs[s.input];
        const std::int64_t p = bound.position.eval(buffers_.dims, index);
        check(p >= 0 && p < static_cast<std::int64_t>(in.size()), "cuda kernel",
              "node {} reads position {} of a {}-element buffer (invalid view)", node_, p, in.size());
        v.copy_element(0, in, static_cast<std::size_t>(p));
    }

    const Body& body_;
    std::uint32_t node_;
    const KernelBuffers& buffers_;
    const std::vector<HostBuffer>* stages_;
    std::vector<HostBuffer> values_;
    std::vector<BoundLoad> loads_;
};

// out[o] = the fold of the body at first + r * inner over r < extent: f32
// accumulation for floats (the kernels hold `float acc`), NaN winning a max.
inline void fold_into(OpKind fold, DType value, BodyRunner& body, HostBuffer& out, std::size_t o, std::int64_t first,
                      std::int64_t extent, std::int64_t inner) {
    const bool sum = fold == OpKind::SumReduce;
    if (is_float(value)) {
        float acc = sum ? 0.0f : -std::numeric_limits<float>::infinity();
        for (std::int64_t r = 0; r < extent; ++r) {
            body.run(first + r * inner);
            const auto v = static_cast<float>(body.result().as_double(0));
            acc = sum ? acc + v : (std::isnan(v) || std::isnan(acc) ? std::numeric_limits<float>::quiet_NaN() : std::max(acc, v));
        }
        out.store_double(o, acc);
        return;
    }
    std::int64_t acc = sum ? 0 : std::numeric_limits<std::int64_t>::min();
    if (!sum && out.dtype == DType::I32) acc = std::numeric_limits<std::int32_t>::min();
    if (!sum && (out.dtype == DType::U8 || out.dtype == DType::Bool)) acc = 0;
    for (std::int64_t r = 0; r < extent; ++r) {
        body.run(first + r * inner);
        const std::int64_t v = body.result().as_int(0);
        acc = sum ? static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v))
                  : std::max(acc, v);
    }
    out.store_int(o, acc);
}

// Each row: its stages in order, then its elements.
inline void run_rows(const Kernel& k, const KernelBuffers& buffers, std::int64_t count) {
    const std::int64_t extent = k.extent.eval(buffers.dims);
    std::vector<HostBuffer> stages;
    for (const RowStageKernel& s : k.stages) stages.emplace_back(s.dtype, 1);
    std::vector<BodyRunner> stage_bodies;
    for (const RowStageKernel& s : k.stages) stage_bodies.emplace_back(s.body, k.node, buffers, &stages);
    BodyRunner element(k.body, k.node, buffers, &stages);
    for (std::int64_t base = 0; extent > 0 && base < count; base += extent) {
        for (std::size_t j = 0; j < k.stages.size(); ++j) {
            const RowStageKernel& s = k.stages[j];
            if (s.folds) {
                fold_into(s.fold, s.body.steps.back().dtype, stage_bodies[j], stages[j], 0, base, extent, 1);
            } else {
                stage_bodies[j].run(base);
                stages[j].copy_element(0, stage_bodies[j].result(), 0);
            }
        }
        for (std::int64_t z = base; z < base + extent; ++z) {
            element.run(z);
            buffers.out.copy_element(static_cast<std::size_t>(z), element.result(), 0);
        }
    }
}

}  // namespace interpreter_detail

inline void interpret(const Kernel& k, const KernelBuffers& buffers) {
    using namespace interpreter_detail;
    const std::int64_t count = k.count.eval(buffers.dims);
    check(k.store_at || static_cast<std::int64_t>(buffers.out.size()) >= count, "cuda kernel",
          "node {}: {} outputs into a {}-element buffer", k.node, count, buffers.out.size());
    if (k.shape == Kernel::Shape::Row) {
        run_rows(k, buffers, count);
        return;
    }
    BodyRunner body(k.body, k.node, buffers);
    if (k.shape == Kernel::Shape::Elementwise) {
        const std::int64_t n = k.store_count.eval(buffers.dims);
        for (std::int64_t z = 0; z < count; ++z) {
            body.run(z);
            const std::int64_t to = k.store_at ? body.value(*k.store_at).as_int(0) : z;
            check(!k.store_at || (to >= 0 && to < n), "Scatter", "node {}: index {} at position {} is out of range for {} elements", k.node,
                  to, z, n);
            buffers.out.copy_element(static_cast<std::size_t>(to), body.result(), 0);
        }
        return;
    }
    const std::int64_t extent = k.extent.eval(buffers.dims), inner = std::max<std::int64_t>(k.inner.eval(buffers.dims), 1);
    for (std::int64_t o = 0; o < count; ++o)
        fold_into(k.fold, k.body.steps.back().dtype, body, buffers.out, static_cast<std::size_t>(o),
                  (o / inner) * extent * inner + o % inner, extent, inner);
}

// In index order, so a repeated index keeps the last write: what the device's
// two passes (the highest writer of each position claims it, then writes) give.
inline void interpret(const ScatterKernel& k, const KernelBuffers& buffers) {
    const DynMap& dims = buffers.dims;
    const std::int64_t count = k.count.eval(dims), n = k.out_count.eval(dims);
    const Expression index_at = k.indexes.index_expression().bind(dims), index_valid = k.indexes.valid_expression().bind(dims);
    const Expression source_at = k.source.index_expression().bind(dims), source_valid = k.source.valid_expression().bind(dims);
    const HostBuffer& indexes = *buffers.inputs[0];
    const HostBuffer& source = *buffers.inputs[1];
    check(k.source.numel().eval(dims) >= count, "Scatter", "node {}: {} indexes but only {} source elements", k.node, count,
          k.source.numel().eval(dims));
    for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t at = index_valid.eval(dims, i) ? indexes.as_int(static_cast<std::size_t>(index_at.eval(dims, i))) : 0;
        check(at >= 0 && at < n, "Scatter", "node {}: index {} at position {} is out of range for {} elements", k.node, at, i, n);
        if (source_valid.eval(dims, i)) buffers.out.copy_element(static_cast<std::size_t>(at), source, static_cast<std::size_t>(source_at.eval(dims, i)));
        else buffers.out.store_int(static_cast<std::size_t>(at), 0);
    }
}

}  // namespace luminal::cuda

#pragma once
// The kernel IR: what a generated CUDA kernel computes, small enough to print
// as CUDA source (kernel_source.hpp) and to run on the host (kernel_interpreter.hpp),
// so CI proves what every kernel computes without a GPU.
//
// A kernel evaluates a Body, a straight-line list of per-element steps, for
// each element of its index space:
//   Elementwise  out[z] = body(z)                        for z < count
//   Reduce       out[o] = fold over r < extent of body(i),
//                i = (o / inner) * extent * inner + r * inner + o % inner,  for o < count
//   Row          per row of `extent` elements: each stage's value (a fold of
//                its body over the row, or its body once at the row's first
//                element), then out[z] = body(z) for the row's elements
// Loads read kernel inputs through views (ShapeTrackers over the element
// index), or, for a gather, at the logical index another step computed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/graph/op.hpp"
#include "luminal/shape/expression.hpp"
#include "luminal/shape/shape_tracker.hpp"

namespace luminal::cuda {

// Masked: step b's value where step a is nonzero, else 0 (a read through padding).
enum class StepKind : std::uint8_t { Load, Constant, Index, Unary, Binary, Cast, StageValue, Masked };

inline constexpr std::int32_t kAtElement = -1;
inline constexpr unsigned kThreadsPerBlock = 256;  // every generated kernel's block
// Elements an elementwise kernel's thread takes per trip of its grid-stride loop, a grid stride apart (still
// coalesced): their loads are independent, so a thread has this many in flight instead of one.
inline constexpr int kElementwiseUnroll = 4;

struct Step {
    StepKind kind = StepKind::Constant;
    DType dtype = DType::F32;  // of the step's value
    OpKind op = OpKind::Add;   // Unary, Binary
    std::uint16_t a = 0, b = 0;  // operand steps (Unary, Binary, Cast, Masked)
    std::uint16_t input = 0;     // Load: kernel input; StageValue: the row stage
    ShapeTracker view;           // Load: how the input is read
    std::int32_t at = kAtElement;  // Load: the element index, or the step holding a logical index (gather, bounds-checked)
    double value = 0;              // Constant
    Expression index;              // Index: over the element index and dims

    friend bool operator==(const Step&, const Step&) = default;
};

struct Body {
    std::vector<Step> steps;  // the last one is the result
    std::size_t hash() const {
        std::size_t h = 0xB0D7u;
        for (const Step& s : steps) {
            h = (h ^ (static_cast<std::size_t>(s.kind) << 8 | static_cast<std::size_t>(s.dtype) | static_cast<std::size_t>(s.op) << 16)) * 0x100000001B3ull;
            h = (h ^ (std::size_t{s.a} << 32 | std::size_t{s.b} << 16 | s.input)) * 0x9E3779B97F4A7C15ull;
            h ^= s.view.hash() + s.index.hash() * 31 + static_cast<std::size_t>(s.at + 1) * 0x2545F491u + std::hash<double>{}(s.value);
        }
        return h;
    }
    std::uint16_t add(Step s) {
        steps.push_back(std::move(s));
        return static_cast<std::uint16_t>(steps.size() - 1);
    }
    friend bool operator==(const Body&, const Body&) = default;
};

// How a reduction is spread over threads; all give the same fold, in a different order.
enum class ReduceStrategy : std::uint8_t { ThreadPerOutput, WarpPerOutput, BlockPerOutput };

inline constexpr std::string_view name_of(ReduceStrategy s) {
    switch (s) {
        case ReduceStrategy::ThreadPerOutput: return "thread";
        case ReduceStrategy::WarpPerOutput: return "warp";
        case ReduceStrategy::BlockPerOutput: return "block";
    }
    return "?";
}

// A per-row value of a Row kernel, rounded to `dtype`.
struct RowStageKernel {
    bool folds = true;
    OpKind fold = OpKind::SumReduce;
    DType dtype = DType::F32;
    Body body;
    friend bool operator==(const RowStageKernel&, const RowStageKernel&) = default;
};

struct Kernel {
    enum class Shape : std::uint8_t { Elementwise, Reduce, Row } shape = Shape::Elementwise;
    std::vector<DType> inputs;  // dtypes of the buffers read
    DType out = DType::F32;
    Body body;
    Expression count;  // outputs written
    // Reduce and Row (extent: the row's length; strategy: a warp or a block per row)
    OpKind fold = OpKind::SumReduce;
    Expression extent = 1, inner = 1;
    ReduceStrategy strategy = ReduceStrategy::ThreadPerOutput;
    std::vector<RowStageKernel> stages;  // Row only
    // Elementwise only: each element is stored at the position this body step
    // computes, of an output of `store_count` elements, instead of at the
    // element; the positions of distinct elements are distinct.
    std::optional<std::uint16_t> store_at;
    Expression store_count = 0;
    // Elementwise only: this input is the output's own buffer, each element read
    // where it is written (a carried state updated in place): neither is restrict.
    std::optional<std::uint16_t> overwrites;
    std::uint32_t node = 0;  // program node, for error messages

    friend bool operator==(const Kernel& x, const Kernel& y) {
        return x.shape == y.shape && x.inputs == y.inputs && x.out == y.out && x.body == y.body && x.count == y.count &&
               x.fold == y.fold && x.extent == y.extent && x.inner == y.inner && x.strategy == y.strategy &&
               x.stages == y.stages && x.store_at == y.store_at && x.store_count == y.store_count && x.overwrites == y.overwrites;
    }
};

// out[indexes[i]] = src[i] for i < count, the last write winning where indexes repeat.
// Inputs: 0 the indexes, 1 the source, both read through their views.
struct ScatterKernel {
    std::vector<DType> inputs;
    DType out = DType::F32;
    ShapeTracker indexes, source;
    Expression count, out_count;
    std::uint32_t node = 0;
};

}  // namespace luminal::cuda

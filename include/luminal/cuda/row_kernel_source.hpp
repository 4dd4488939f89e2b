#pragma once
// A Row kernel as CUDA source: a warp or a block per row, grid-stride over
// the rows. A stage's fold is spread over the group's threads and combined
// with a butterfly of shuffles (for a block, once more over the warps'
// partial values in shared memory), so every thread holds the same value; a
// per-row stage runs in every thread at the row's first element. The element
// loop then writes the row.
#include <deque>
#include <string>
#include <vector>

#include "luminal/cuda/kernel_source.hpp"

namespace luminal::cuda {

// Printed bodies and the printers that named their subexpressions (whose
// dims the kernel declares), kept where their addresses stay put.
struct PrintedBodies {
    std::deque<std::string> bodies;
    std::deque<source_detail::ExpressionPrinter> printers;
    const std::string& print(const Body& body, std::string prefix, const std::string& index) {
        bodies.emplace_back();
        printers.emplace_back(bodies.back(), std::move(prefix));
        source_detail::print_body(body, index, printers.back(), bodies.back());
        return bodies.back();
    }
};

// The statements giving each stage's per-row value `stage<j>` for the row
// starting at element `base`, spread over a warp (lane, 32) or a block
// (threadIdx.x, blockDim.x; shared partial_f / partial_i and `warp` declared).
inline std::string row_stages_source(const std::vector<RowStageKernel>& stages, bool block, const std::string& extent,
                                     PrintedBodies& printed) {
    using namespace source_detail;
    const std::string first = block ? "(i64)threadIdx.x" : "(i64)lane", stride = block ? "(i64)blockDim.x" : "32LL";
    std::string rows;
    for (std::size_t j = 0; j < stages.size(); ++j) {
        const RowStageKernel& stage = stages[j];
        const std::string& body = printed.print(stage.body, fmt::format("s{}e", j), "i");
        const std::string result = fmt::format("v{}", stage.body.steps.size() - 1);
        const DType value = stage.body.steps.back().dtype;
        rows += fmt::format("    {} stage{};\n    {{\n", value_type(stage.dtype), j);
        if (!stage.folds) {
            rows += "    const i64 i = base;\n" + body + fmt::format("    stage{} = {};\n    }}\n", j, result);
            continue;
        }
        const std::string init = fold_init(stage.fold, value, stage.dtype), acc_type = value_type(value);
        const std::string warp_fold = "    for (int s = 16; s > 0; s >>= 1) acc = " +
                                      fold_step(stage.fold, value, "acc", "__shfl_xor_sync(0xffffffffu, acc, s)") + ";\n";
        // Unrolled so each thread issues several loads before the first add waits on one (a row is a
        // few thousand elements: one load per trip would be a serial chain of round trips).
        rows += fmt::format("    {} acc = {};\n    #pragma unroll 4\n    for (i64 r = {}; r < {}; r += {}) {{\n    const i64 i = base + r;\n{}"
                            "    acc = {};\n    }}\n",
                            acc_type, init, first, extent, stride, body, fold_step(stage.fold, value, "acc", result));
        rows += warp_fold;
        if (block)
            rows += fmt::format("    if (lane == 0) partial_{0}[warp] = acc;\n    __syncthreads();\n"
                                "    acc = lane < (int)(blockDim.x >> 5) ? partial_{0}[lane] : {1};\n{2}    __syncthreads();\n",
                                is_float(value) ? "f" : "i", init, warp_fold);
        rows += fmt::format("    stage{} = {};\n    }}\n", j,
                            convert(is_float(value) ? DType::F32 : DType::I64, stage.dtype, "acc"));
    }
    return rows;
}

inline std::string declarations_of(const source_detail::ExpressionPrinter& sizes, const PrintedBodies& printed) {
    std::vector<const source_detail::ExpressionPrinter*> used{&sizes};
    for (const source_detail::ExpressionPrinter& p : printed.printers) used.push_back(&p);
    return source_detail::dim_declarations(used);
}

inline std::string row_kernel_source(const Kernel& k) {
    using namespace source_detail;
    const bool block = k.strategy == ReduceStrategy::BlockPerOutput;
    std::string sizes;
    ExpressionPrinter size_exprs(sizes, "c");
    const std::string count = size_exprs.print(k.count, "0"), extent = size_exprs.print(k.extent, "0");
    PrintedBodies printed;
    std::string rows = row_stages_source(k.stages, block, extent, printed);
    const std::string first = block ? "(i64)threadIdx.x" : "(i64)lane", stride = block ? "(i64)blockDim.x" : "32LL";
    const std::string& element = printed.print(k.body, "e", "z");
    const DType last = k.body.steps.back().dtype;
    rows += fmt::format("    #pragma unroll 4\n    for (i64 r = {}; r < {}; r += {}) {{\n    const i64 z = base + r;\n{}    out[z] = {};\n    }}\n", first,
                        extent, stride, element, narrow(k.out, convert(last, k.out, fmt::format("v{}", k.body.steps.size() - 1))));
    std::string code = signature(kRowEntry, k) + " {\n" + declarations_of(size_exprs, printed) + sizes;
    code += fmt::format("  const i64 rows = {1} > 0 ? {0} / {1} : 0LL;\n", count, extent);
    code += "  const int lane = threadIdx.x & 31;\n";
    if (block) {
        code += "  const int warp = threadIdx.x >> 5;\n  __shared__ float partial_f[32];\n  __shared__ i64 partial_i[32];\n";
        code += "  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {\n";
    } else {
        code += "  for (i64 row = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5; row < rows; row += ((i64)gridDim.x * blockDim.x) >> 5) {\n";
    }
    code += fmt::format("    const i64 base = row * {};\n", extent) + rows + "  }\n}\n";
    return std::string(kKernelPrelude) + code;
}

}  // namespace luminal::cuda

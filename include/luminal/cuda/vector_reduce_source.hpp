#pragma once
// The 16-byte-load form of a warp-per-output reduction over the last axis
// (the decode GEMV: one output row per warp, each lane reading 16 bytes of the
// narrowest operand per load). Each lane folds V consecutive elements per
// step, V = 16 / the narrowest loaded element; a load that walks the folded
// axis contiguously reads its V elements with 16-byte vector loads, one that
// is broadcast along it reads one element. Same fold as the scalar form, in
// another order. Whether an execution may use it (alignment, extent a
// multiple of V) depends on the dims: vector_launch_ok().
#include <algorithm>
#include <optional>
#include <string>

#include "luminal/cuda/kernel_source.hpp"

namespace luminal::cuda {

namespace vector_detail {

enum class Walk { Contiguous, Broadcast };

// How each load walks the folded axis, or nullopt when one does neither (or gathers).
inline std::optional<std::vector<Walk>> load_walks(const Kernel& k) {
    if (k.shape != Kernel::Shape::Reduce || k.strategy != ReduceStrategy::WarpPerOutput) return std::nullopt;
    std::vector<Walk> walks;
    for (const Step& s : k.body.steps) {
        if (s.kind != StepKind::Load) continue;
        if (s.at != kAtElement || s.view.rank() == 0) return std::nullopt;
        const Expression stride = s.view.axes().back().stride;
        if (stride == Expression(1)) walks.push_back(Walk::Contiguous);
        else if (stride == Expression(0)) walks.push_back(Walk::Broadcast);
        else return std::nullopt;
    }
    if (std::find(walks.begin(), walks.end(), Walk::Contiguous) == walks.end()) return std::nullopt;
    return walks;
}

}  // namespace vector_detail

// Elements each lane folds per step: 16 bytes of the narrowest contiguous load.
inline int vector_width(const Kernel& k) {
    std::size_t narrowest = 16;
    for (const Step& s : k.body.steps)
        if (s.kind == StepKind::Load) narrowest = std::min(narrowest, size_of(s.dtype));
    return static_cast<int>(16 / narrowest);
}

// Whether the kernel has a vector form: asked by planning and costing for every
// reduction, which need not print the source to know.
inline bool has_vector_form(const Kernel& k) { return vector_detail::load_walks(k).has_value(); }

// The vector form's source, or nullopt where the kernel has none.
inline std::optional<std::string> vector_kernel_source(const Kernel& k) {
    using namespace source_detail;
    const auto walks = vector_detail::load_walks(k);
    if (!walks) return std::nullopt;
    const int v = vector_width(k);
    std::string sizes, loads, body;
    ExpressionPrinter size_exprs(sizes, "c"), load_exprs(loads, "e");
    const std::string count = size_exprs.print(k.count, "0"), extent = size_exprs.print(k.extent, "0");
    std::vector<std::string> element_of(k.body.steps.size());
    std::size_t load = 0;
    for (std::size_t j = 0; j < k.body.steps.size(); ++j) {
        const Step& s = k.body.steps[j];
        if (s.kind != StepKind::Load) continue;
        const std::string position = load_exprs.print(s.view.index_expression(), "i");
        const std::string valid = load_exprs.print(s.view.valid_expression(), "i");
        const std::string type = storage_type(s.dtype), value = value_type(s.dtype);
        if ((*walks)[load++] == vector_detail::Walk::Broadcast) {
            loads += fmt::format("      const {} b{} = {} != 0 ? {} : ({})0;\n", value, j, valid,
                                 widen(s.dtype, fmt::format("in{}[{}]", s.input, position)), value);
            element_of[j] = fmt::format("b{}", j);
            continue;
        }
        const std::size_t chunks = std::max<std::size_t>(static_cast<std::size_t>(v) * size_of(s.dtype) / 16, 1);
        loads += fmt::format("      __align__(16) {} raw{}[{}];\n", type, j, v);
        loads += fmt::format("      if ({} != 0) {{\n", valid);
        for (std::size_t q = 0; q < chunks; ++q)
            loads += fmt::format("        reinterpret_cast<uint4*>(raw{0})[{1}] = reinterpret_cast<const uint4*>(in{2} + {3})[{1}];\n",
                                 j, q, s.input, position);
        loads += fmt::format("      }} else {{\n        for (int q = 0; q < {}; ++q) raw{}[q] = ({})0;\n      }}\n", v, j, type);
        element_of[j] = widen(s.dtype, fmt::format("raw{}[q]", j));
    }
    ExpressionPrinter body_exprs(body, "f");
    print_body(k.body, "iq", body_exprs, body, element_of);
    const std::string result = fmt::format("v{}", k.body.steps.size() - 1);
    const DType last = k.body.steps.back().dtype;
    const std::string acc_type = value_type(last);
    const std::string store = narrow(k.out, convert(is_float(last) ? DType::F32 : DType::I64, k.out, "acc"));
    std::string code = std::string(kKernelPrelude) + signature(kReduceEntry, k) + " {\n" +
                       dim_declarations({&size_exprs, &load_exprs, &body_exprs}) + sizes;
    code += "  const int lane = threadIdx.x & 31;\n";
    code += "  for (i64 o = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5; o < " + count +
            "; o += ((i64)gridDim.x * blockDim.x) >> 5) {\n";
    code += fmt::format("    const i64 first = o * {};\n    {} acc = {};\n", extent, acc_type, fold_init(k));
    code += fmt::format("    for (i64 r = lane * {0}; r < {1}; r += 32 * {0}) {{\n      const i64 i = first + r;\n", v, extent);
    code += loads;
    code += fmt::format("      #pragma unroll\n      for (int q = 0; q < {}; ++q) {{\n        const i64 iq = i + q;\n", v);
    code += body + "        acc = " + fold_step(k, "acc", result) + ";\n      }\n    }\n";
    code += "    for (int s = 16; s > 0; s >>= 1) acc = " + fold_step(k, "acc", "__shfl_xor_sync(0xffffffffu, acc, s)") + ";\n";
    code += "    if (lane == 0) out[o] = " + store + ";\n  }\n}\n";
    return code;
}

// Whether the vector form computes this execution: the fold runs over the
// last axis (inner 1), its extent is a multiple of V, and every contiguous
// load's first element of each row is V-aligned and its row fully valid.
inline bool vector_launch_ok(const Kernel& k, const DynMap& dims) {
    const auto walks = vector_detail::load_walks(k);
    if (!walks) return false;
    const std::int64_t v = vector_width(k);
    if (k.inner.eval(dims) != 1 || k.extent.eval(dims) % v != 0) return false;
    std::size_t load = 0;
    for (const Step& s : k.body.steps) {
        if (s.kind != StepKind::Load || (*walks)[load++] != vector_detail::Walk::Contiguous) continue;
        const auto& axes = s.view.axes();
        const auto& r = axes.back();
        const std::int64_t offset = r.offset.eval(dims), size = r.size.eval(dims);
        if (r.valid_lo.eval(dims) > offset || offset + size > r.valid_hi.eval(dims) || offset % v != 0) return false;
        if (s.view.base().eval(dims) % v != 0) return false;
        for (std::size_t a = 0; a + 1 < axes.size(); ++a)
            if (axes[a].size.eval(dims) != 1 && (axes[a].stride.eval(dims) % v != 0 || (axes[a].offset.eval(dims) * axes[a].stride.eval(dims)) % v != 0))
                return false;
    }
    return true;
}

}  // namespace luminal::cuda

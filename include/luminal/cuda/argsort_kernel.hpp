#pragma once
// Argsort (lowering/argsort.hpp) on the device: a block per row (rows shared
// out over the grid). Each element becomes one 64-bit key, its value's order
// as a 32-bit integer above its position, so equal values keep their order;
// the row's keys are padded to a power of two P with keys above every real
// one and sorted by a bitonic network in dynamic shared memory (log2 P
// (log2 P + 1) / 2 compare-exchange steps, each a block barrier); the low
// halves of the first n keys are the order. Rows of at most kArgsortMaxRow
// values whose dtype fits in 32 bits (the rule's bound, cuda_rules.hpp).
#include <algorithm>
#include <bit>
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/gemv_source.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/lowering/argsort.hpp"

namespace luminal::cuda {

inline constexpr std::int64_t kArgsortMaxRow = 4096;  // 32 KB of keys in shared memory

// The rows the CUDA Argsort kernel sorts: a constant length the block's shared memory holds, values of 32 bits or less.
struct CudaSortableRows {
    static bool accepts(DType dtype, const Expression& length) {
        const auto n = length.as_constant();
        return n && *n > 0 && *n <= kArgsortMaxRow && size_of(dtype) <= 4;
    }
};

struct ArgsortKernel final : CustomKernel {
    static constexpr int kThreads = 256;
    DType input = DType::F32;
    ShapeTracker view;  // the input as [..., n]
    std::int64_t length = 0;
    Expression rows;
    bool descending = false;
    std::uint32_t node = 0;

    std::int64_t padded() const { return static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(length))); }
    std::string_view entry() const override { return "luminal_argsort"; }
    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        g.grid = static_cast<unsigned>(std::clamp<std::int64_t>(rows.eval(dims), 0, std::int64_t{multiprocessors} * 16));
        g.block = kThreads;
        g.shared_bytes = static_cast<std::size_t>(padded()) * sizeof(std::uint64_t);
        return g;
    }
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double r = static_cast<double>(std::max<std::int64_t>(rows.eval(dims), 0)), n = static_cast<double>(length),
                     p = static_cast<double>(padded()), steps = std::log2(p) * (std::log2(p) + 1) / 2;
        w.grid = g.grid;
        w.block = static_cast<int>(g.block);
        w.shared_bytes = g.shared_bytes;
        add_read(w, sources[0], r * n, device);
        add_write(w, r * n * sizeof(std::int32_t), device);
        w.dram_in_flight = w.l2_in_flight = static_cast<double>(size_of(input));
        w.flops = r * p / 2 * steps;
        return w;
    }
    void interpret(const KernelBuffers& b) const override {
        const ReferenceInput x(*b.inputs[0], view, b.dims, node);
        const std::int64_t count = rows.eval(b.dims);
        std::vector<std::int64_t> keys(static_cast<std::size_t>(length));
        std::vector<std::int32_t> order(static_cast<std::size_t>(length));
        std::vector<std::uint64_t> scratch;
        for (std::int64_t r = 0; r < count; ++r) {
            for (std::int64_t i = 0; i < length; ++i)
                keys[i] = is_float(input) ? argsort_detail::float_key(static_cast<float>(x.f(r * length + i))) : x.i(r * length + i);
            argsort_detail::sort_row(keys, descending, order, scratch);
            for (std::int64_t j = 0; j < length; ++j) b.out.store_int(static_cast<std::size_t>(r * length + j), order[j]);
        }
    }

    std::string source() const override {
        using namespace source_detail;
        std::string sizes, reads;
        ExpressionPrinter size_exprs(sizes, "c"), read_exprs(reads, "k");
        const std::string n_rows = size_exprs.print(rows, "0");
        const std::string at = read_exprs.print(view.index_expression(), "lz");
        const std::string value = widen(input, "in0[" + at + "]");
        // The value's order as a signed 32-bit key (floats: NaN above +inf, -0 = +0), reversed by ~ when descending.
        std::string key = is_float(input)
                              ? fmt::format("const float v = {};\n        const int b = (int)__float_as_uint(v);\n"
                                            "        int key = v != v ? 0x7f800001 : (b < 0 ? -(b & 0x7fffffff) : b);\n",
                                            value)
                              : fmt::format("int key = (int){};\n", value);
        if (descending) key += "        key = ~key;\n";
        std::string code = std::string(kKernelPrelude) + std::string(kGemvPrelude);
        code += signature(entry(), DType::I32, std::span(&input, 1)) + " {\n" + dim_declarations({&size_exprs, &read_exprs}) + sizes;
        code += fmt::format(
            "  unsigned long long* const keys = (unsigned long long*)luminal_dynamic_shared();\n"
            "  const int n = {0}, padded = {1};\n"
            "  for (i64 row = blockIdx.x; row < {2}; row += gridDim.x) {{\n"
            "    for (int i = threadIdx.x; i < padded; i += blockDim.x) {{\n"
            "      unsigned long long sortable = ~0ull;\n"
            "      if (i < n) {{\n        const i64 lz = row * n + i;\n{3}        {4}"
            "        sortable = ((unsigned long long)((unsigned)key ^ 0x80000000u) << 32) | (unsigned)i;\n      }}\n"
            "      keys[i] = sortable;\n    }}\n    __syncthreads();\n"
            "    for (int size = 2; size <= padded; size <<= 1) {{\n"
            "      for (int stride = size >> 1; stride > 0; stride >>= 1) {{\n"
            "        for (int t = threadIdx.x; t < padded / 2; t += blockDim.x) {{\n"
            "          const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;\n"
            "          const unsigned long long a = keys[lo], b = keys[hi];\n"
            "          if ((a > b) == ((lo & size) == 0)) {{ keys[lo] = b; keys[hi] = a; }}\n"
            "        }}\n        __syncthreads();\n      }}\n    }}\n"
            "    for (int j = threadIdx.x; j < n; j += blockDim.x) out[row * n + j] = (int)(keys[j] & 0xffffffffull);\n"
            "    __syncthreads();\n  }}\n}}\n",
            length, padded(), n_rows, reads, key);
        return code;
    }
};

inline std::shared_ptr<const ArgsortKernel> argsort_kernel(const NodeSpec& spec, const ArgsortOp& op, std::span<const DType> dtypes,
                                                           std::uint32_t node) {
    constexpr const char* name = "cuda Argsort";
    check(dtypes.size() == 1 && spec.views.size() == 1 && spec.views[0].rank() > 0, name, "node {}: needs one input with an axis to sort",
          node);
    const Expression length = spec.views[0].dim(spec.views[0].rank() - 1);
    check(CudaSortableRows::accepts(dtypes[0], length), name,
          "node {}: sorts rows of at most {} values of 32 bits or less, got {} of {}", node, kArgsortMaxRow, length.to_string(),
          name_of(dtypes[0]));
    auto k = std::make_shared<ArgsortKernel>();
    k->input = dtypes[0];
    k->view = spec.views[0];
    k->length = *length.as_constant();
    k->rows = product(Shape(spec.shape.begin(), spec.shape.end() - 1));
    k->descending = op.descending;
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

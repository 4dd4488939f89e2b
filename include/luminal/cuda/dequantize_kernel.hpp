#pragma once
// Dequantize and QuantizedGather (lowering/quantized.hpp) on CUDA: a thread
// per output element decodes that element of its block, the whole matrix in
// order (Dequantize: the f32 weight a prefill's cuBLASLt product reads) or
// the elements an index tensor names (an embedding lookup in a quantized
// table; an index outside the matrix is a gather fault naming the node).
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/cuda/quant_blocks_source.hpp"

namespace luminal::cuda {

struct DequantizeKernel final : CustomKernel {
    QuantFormat format = QuantFormat::Q8_0;
    std::int64_t rows = 0, cols = 0;
    bool gather = false;               // QuantizedGather: input 1 holds flat element indexes
    std::vector<DType> inputs;
    std::vector<ShapeTracker> views;   // the blocks', the indexes'
    Expression count;                  // output elements
    std::uint32_t node = 0;

    std::string_view entry() const override { return "luminal_dequantize"; }
    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        const std::int64_t n = count.eval(dims);
        g.grid = static_cast<unsigned>(std::clamp<std::int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, 0,
                                                                std::int64_t{multiprocessors} * 16));
        return g;
    }
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double n = static_cast<double>(count.eval(dims));
        const auto layout = io::layout_of(format);
        w.grid = g.grid;
        w.block = static_cast<int>(g.block);
        // Gathered elements read about their share of a block each; the whole matrix reads every block once.
        add_read(w, sources[0], gather ? n * layout.block_bytes / layout.block_elements + n * 4 : sources[0].elements, device);
        if (gather) add_read(w, sources[1], n, device);
        add_write(w, n * sizeof(float), device);
        w.dram_in_flight = w.l2_in_flight = 4;
        w.flops = n * 4;
        return w;
    }
    void interpret(const KernelBuffers& b) const override {
        std::vector<ReferenceInput> readers;
        for (std::size_t i = 0; i < views.size(); ++i) readers.emplace_back(*b.inputs[i], views[i], b.dims, node);
        const ReferenceCall call{readers, b.out, b.dims, node};
        if (gather) QuantizedGatherOp{format, rows, cols}.reference(call);
        else DequantizeOp{format, rows, cols}.reference(call);
    }

    std::string source() const override {
        using namespace source_detail;
        const auto layout = io::layout_of(format);
        std::string sizes, index_code;
        ExpressionPrinter size_exprs(sizes, "c"), index_exprs(index_code, "a");
        const std::string n = size_exprs.print(count, "0");
        const std::string at = gather ? index_exprs.print(views[1].index_expression(), "z") : std::string();
        std::string code = std::string(kKernelPrelude) + std::string(kQuantPrelude);
        code += signature(entry(), DType::F32, inputs) + " {\n" + dim_declarations({&size_exprs, &index_exprs}) + sizes;
        code += fmt::format("  const i64 C = {}LL, ELEMENTS = {}LL * C, RB = {}LL, BE = {}, BB = {};\n", cols, rows,
                            quantized_bytes(format, 1, cols), layout.block_elements, layout.block_bytes);
        code += fmt::format("  for (i64 z = (i64)blockIdx.x * blockDim.x + threadIdx.x; z < {}; z += (i64)gridDim.x * blockDim.x) {{\n", n);
        if (gather)
            code += index_code + fmt::format("    const i64 e = (i64)in1[{}];\n", at) +
                    "    if (e < 0 || e >= ELEMENTS) {\n      luminal_fault(fault, 1, node, e, ELEMENTS);\n      out[z] = 0.0f;\n"
                    "      continue;\n    }\n";
        else
            code += "    const i64 e = z;\n";
        code += fmt::format("    const i64 row = e / C, col = e % C;\n"
                            "    out[z] = luminal_{}_element(in0 + row * RB + (col / BE) * BB, (int)(col % BE));\n  }}\n}}\n",
                            quant_format_tag(format));
        return code;
    }
};

// A Dequantize or QuantizedGather node `spec` as a kernel reading buffers of `dtypes`.
inline std::shared_ptr<const DequantizeKernel> dequantize_kernel(const NodeSpec& spec, QuantFormat format, std::int64_t rows,
                                                                 std::int64_t cols, bool gather, std::span<const DType> dtypes,
                                                                 std::uint32_t node) {
    check(!dtypes.empty() && dtypes[0] == DType::U8 && spec.views[0].is_contiguous(), "cuda Dequantize",
          "node {}: CUDA decodes contiguous u8 blocks, got {}", node, dtypes.empty() ? "no input" : name_of(dtypes[0]));
    quant_format_tag(format);  // an Error for a format with no device functions
    auto k = std::make_shared<DequantizeKernel>();
    k->format = format;
    k->rows = rows;
    k->cols = cols;
    k->gather = gather;
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->views = spec.views;
    k->count = product(spec.shape);
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

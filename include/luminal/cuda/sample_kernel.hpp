#pragma once
// SampleToken on the device: a block per row of logits. At temperature 0 the
// block's threads find the first maximum; with top_k they first select the
// top_k-th largest biased logit by radix select (four passes of 8-bit digit
// histograms over the logits' order-preserving bit patterns), then draw by
// Gumbel-max among the logits at least that large, with the hash the
// reference semantics use. Only the token's id is written.
#include <memory>

#include "luminal/cuda/custom_kernel.hpp"
#include "luminal/cuda/kernel_source.hpp"
#include "luminal/lowering/sample_token.hpp"

namespace luminal::cuda {

inline constexpr std::string_view kSamplePrelude = R"(__device__ __forceinline__ float luminal_uniform(unsigned long long seed, unsigned long long counter, unsigned long long id) {
  unsigned long long x = seed * 0x9E3779B97F4A7C15ull + counter * 0xD1B54A32D192ED03ull + id;
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 31;
  return ((float)(x >> 40) + 0.5f) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ unsigned luminal_ordered(float f) {
  const unsigned bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float luminal_unordered(unsigned u) { return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u); }
)";

struct SampleKernel final : CustomKernel {
    static constexpr int kThreads = 512, kUnroll = 8;
    std::vector<DType> inputs;
    ShapeTracker logits, bias, settings;
    Expression vocab, rows, counter;
    std::uint32_t node = 0;

    std::string_view entry() const override { return "luminal_sample"; }
    KernelGeometry geometry(const DynMap& dims, int multiprocessors) const override {
        KernelGeometry g;
        g.grid = static_cast<unsigned>(std::clamp<std::int64_t>(rows.eval(dims), 0, std::int64_t{multiprocessors} * 32));
        g.block = kThreads;
        return g;
    }
    LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& g,
                    const DeviceSpec& device) const override {
        LaunchWork w;
        const double v = static_cast<double>(vocab.eval(dims)), r = static_cast<double>(rows.eval(dims));
        w.grid = g.grid;
        w.block = static_cast<int>(g.block);
        add_read(w, sources[0], r * v, device);
        add_read(w, sources[1], v, device);
        add_write(w, r * sizeof(std::int32_t), device);
        w.dram_in_flight = w.l2_in_flight = 4.0 * kUnroll;  // a logit and a bias value per key
        w.flops = r * v * 2;
        return w;
    }
    void interpret(const KernelBuffers& b) const override {
        const DynMap& dims = b.dims;
        const std::int64_t v = vocab.eval(dims), n = rows.eval(dims);
        auto read = [&](std::size_t input, const ShapeTracker& view, std::int64_t element) {
            return static_cast<float>(b.inputs[input]->as_double(static_cast<std::size_t>(view.index_expression().eval(dims, element))));
        };
        std::vector<float> row(static_cast<std::size_t>(v)), added(static_cast<std::size_t>(v));
        for (std::int64_t i = 0; i < v; ++i) added[i] = read(1, bias, i);
        const float temperature = read(2, settings, 0);
        const auto top_k = static_cast<std::int64_t>(read(2, settings, 1));
        const auto seed = static_cast<std::uint64_t>(read(2, settings, 2));
        for (std::int64_t r = 0; r < n; ++r) {
            for (std::int64_t i = 0; i < v; ++i) row[i] = read(0, logits, r * v + i);
            b.out.store_int(static_cast<std::size_t>(r), sampling_detail::pick(row, added, temperature, top_k, seed,
                                                                              static_cast<std::uint64_t>(counter.eval(dims))));
        }
    }

    std::string source() const override {
        using namespace source_detail;
        std::string sizes;
        ExpressionPrinter size_exprs(sizes, "c");
        const std::string v = size_exprs.print(vocab, "0"), n = size_exprs.print(rows, "0"), step = size_exprs.print(counter, "0");
        std::string settings_code, key_code;
        ExpressionPrinter settings_exprs(settings_code, "t"), key_exprs(key_code, "k");
        const std::string temperature = settings_exprs.print(settings.index_expression(), "0"),
                          top_k = settings_exprs.print(settings.index_expression(), "1"),
                          seed = settings_exprs.print(settings.index_expression(), "2");
        const std::string logit_at = key_exprs.print(logits.index_expression(), "lz"), bias_at = key_exprs.print(bias.index_expression(), "i");
        const std::string key = fmt::format("({} + {})", widen(inputs[0], "in0[" + logit_at + "]"), widen(inputs[1], "in1[" + bias_at + "]"));
        const std::string ninf = "(-__int_as_float(0x7f800000))";
        // Each thread loads kUnroll keys before it compares any, so that many loads are in flight.
        auto for_keys = [&](const std::string& body) {
            return fmt::format("    for (i64 i0 = threadIdx.x; i0 < {0}; i0 += {1} * (i64)blockDim.x) {{\n    float keys[{1}];\n"
                               "    #pragma unroll\n    for (int slot = 0; slot < {1}; ++slot) {{\n    const i64 i = i0 + slot * (i64)blockDim.x;\n"
                               "    const i64 lz = row * {0} + i;\n{2}    keys[slot] = i < {0} ? {3} : {4};\n    }}\n"
                               "    #pragma unroll\n    for (int slot = 0; slot < {1}; ++slot) {{\n    const i64 i = i0 + slot * (i64)blockDim.x;\n"
                               "    if (i >= {0}) break;\n    const float key = keys[slot];\n{5}    }}\n    }}\n",
                               v, kUnroll, key_code, key, ninf, body);
        };
        std::string code = std::string(kKernelPrelude) + std::string(kSamplePrelude);
        code += signature(entry(), DType::I32, inputs) + " {\n" +
                dim_declarations({&size_exprs, &settings_exprs, &key_exprs}) + sizes + settings_code;
        code += fmt::format("  const float temperature = {};\n  const i64 top_k = (i64){};\n  const unsigned long long seed = (unsigned long long){};\n",
                            widen(inputs[2], "in2[" + temperature + "]"), widen(inputs[2], "in2[" + top_k + "]"),
                            widen(inputs[2], "in2[" + seed + "]"));
        code += "  __shared__ unsigned histogram[256];\n  __shared__ unsigned chosen_prefix, chosen_remaining;\n"
                "  __shared__ float best_scores[32];\n  __shared__ int best_ids[32];\n"
                "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
        code += fmt::format("  for (i64 row = blockIdx.x; row < {}; row += gridDim.x) {{\n    float threshold = {};\n", n, ninf);
        code += fmt::format("    if (temperature != 0.0f && top_k > 0 && top_k < {}) {{\n"
                            "    unsigned prefix = 0u, remaining = (unsigned)top_k;\n"
                            "    for (int shift = 24; shift >= 0; shift -= 8) {{\n"
                            "    for (int b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0u;\n    __syncthreads();\n"
                            "    const unsigned high = shift == 24 ? 0u : (0xffffffffu << (shift + 8));\n",
                            v);
        code += for_keys("    const unsigned u = luminal_ordered(key);\n    if ((u & high) == (prefix & high)) atomicAdd(&histogram[(u >> shift) & 255u], 1u);\n");
        code += "    __syncthreads();\n    if (threadIdx.x == 0) {\n    unsigned seen = 0u;\n    int b = 255;\n"
                "    for (; b > 0; --b) { if (seen + histogram[b] >= remaining) break; seen += histogram[b]; }\n"
                "    chosen_prefix = prefix | ((unsigned)b << shift);\n    chosen_remaining = remaining - seen;\n    }\n"
                "    __syncthreads();\n    prefix = chosen_prefix;\n    remaining = chosen_remaining;\n    __syncthreads();\n    }\n"
                "    threshold = luminal_unordered(prefix);\n    }\n";
        code += fmt::format("    float best = {};\n    int best_id = 0;\n", ninf);
        code += for_keys(fmt::format(
            "    float score = key;\n"
            "    if (temperature != 0.0f) score = key < threshold || key == {0} || key == -{0} ? {0} : key / temperature - logf(-logf(luminal_uniform(seed, (unsigned long long){1}, (unsigned long long)i)));\n"
            "    if (score > best) {{ best = score; best_id = (int)i; }}\n",
            ninf, step));
        code += "    for (int s = 16; s > 0; s >>= 1) {\n"
                "    const float other = __shfl_xor_sync(0xffffffffu, best, s);\n"
                "    const int other_id = __shfl_xor_sync(0xffffffffu, best_id, s);\n"
                "    if (other > best || (other == best && other_id < best_id)) { best = other; best_id = other_id; }\n    }\n"
                "    if (lane == 0) { best_scores[warp] = best; best_ids[warp] = best_id; }\n    __syncthreads();\n"
                "    if (threadIdx.x == 0) {\n"
                "    for (int w = 1; w < (int)(blockDim.x >> 5); ++w)\n"
                "      if (best_scores[w] > best || (best_scores[w] == best && best_ids[w] < best_id)) { best = best_scores[w]; best_id = best_ids[w]; }\n"
                "    out[row] = best_id;\n    }\n    __syncthreads();\n  }\n}\n";
        return code;
    }
};

inline std::shared_ptr<const SampleKernel> sample_kernel(const NodeSpec& spec, const SampleTokenOp& op, std::span<const DType> dtypes,
                                                         std::uint32_t node) {
    auto k = std::make_shared<SampleKernel>();
    k->inputs.assign(dtypes.begin(), dtypes.end());
    k->logits = spec.views[0];
    k->bias = spec.views[1];
    k->settings = spec.views[2];
    k->vocab = spec.views[0].dim(spec.views[0].rank() - 1);
    k->rows = product(spec.shape);
    k->counter = op.counter;
    k->node = node;
    return k;
}

}  // namespace luminal::cuda

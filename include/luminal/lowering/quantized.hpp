#pragma once
// Weights kept in ggml's block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: blocks
// of 32 elements; Q4_K, Q6_K: super-blocks of 256; blocks never cross a row) and
// the LLIR ops that read them:
//
//  * Dequantize{format, rows, cols}: [bytes] u8 blocks -> [rows, cols] f32.
//    What a model graph says: "this weight is these blocks, dequantized".
//  * QuantizedMatmul{format, rows, cols, activations}: a [.., m, cols] f32,
//    the blocks of b [rows, cols] -> [.., m, rows] f32, out = a · b^T with b
//    read as blocks. Activations::F32 computes what Matmul(a, Dequantize(q))
//    computes (a float reassociation apart); Activations::Q8 first rounds each
//    32-element block of a row of `a` to 8-bit integers with one f32 scale
//    (d = max|x| / 127, q = round(x / d), as llama.cpp's Q8_0), so the block
//    products are integer dot products: faster, and an approximation. The
//    same 32-element activation blocks serve every format: a K super-block
//    meets eight of them, one per 32-element group of its quants.
//  * QuantizedGather{format, rows, cols}: Gather(Dequantize(q), idx) that
//    decodes only the elements it reads (an embedding lookup).
//
// The CPU's rules (cpu/cpu_rules.hpp) offer QuantizedMatmul and
// QuantizedGather in place of Dequantize's users; every op has reference
// semantics, built on io's dequantizers (checked bit-exact against the gguf
// Python package), so the ReferenceRuntime runs either form.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/graph/backend_op.hpp"
#include "luminal/io/gguf_quants.hpp"
#include "luminal/io/gguf_type.hpp"

namespace luminal {

using QuantFormat = io::GgufType;

// The block formats kept quantized; others are dequantized when loaded.
inline constexpr QuantFormat kBlockQuantized[] = {QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1,
                                                  QuantFormat::Q5_0, QuantFormat::Q5_1, QuantFormat::Q4_K,
                                                  QuantFormat::Q6_K};
constexpr bool is_block_quantized(QuantFormat f) {
    return std::ranges::find(kBlockQuantized, f) != std::end(kBlockQuantized);
}
// The elements of one 8-bit activation block, and of one block of the
// 32-element formats; a K super-block holds 256 / kQuantBlock of them.
inline constexpr std::int64_t kQuantBlock = 32;

// Elements per stored block of f: 32, or 256 for the K formats.
constexpr std::int64_t block_elements(QuantFormat f) { return io::layout_of(f).block_elements; }

// Bytes a [rows, cols] matrix of format f takes; cols must be whole blocks.
inline std::int64_t quantized_bytes(QuantFormat f, std::int64_t rows, std::int64_t cols) {
    if (!is_block_quantized(f)) {
        std::string kept;
        for (QuantFormat k : kBlockQuantized) kept += (kept.empty() ? "" : ", ") + std::string(io::name_of(k));
        throw Error("quantized weights", fmt::format("format {} is not kept quantized ({} are)", io::name_of(f), kept));
    }
    const std::int64_t block = block_elements(f);
    check(rows >= 0 && cols >= 0 && cols % block == 0, "quantized weights",
          "a [{}, {}] {} matrix: rows must be whole blocks of {} elements", rows, cols, io::name_of(f), block);
    return rows * (cols / block) * static_cast<std::int64_t>(io::layout_of(f).block_bytes);
}

namespace quantized_detail {

inline void check_blocks(QuantFormat f, std::int64_t rows, std::int64_t cols, std::int64_t have, std::string_view op,
                         std::uint32_t node) {
    const std::int64_t want = quantized_bytes(f, rows, cols);
    check(have == want, op.data(), "node {}: a [{}, {}] {} matrix is {} bytes of blocks, the input has {}", node, rows,
          cols, io::name_of(f), want, have);
}

// The reference input's bytes, then dequantized with io's decoders.
inline std::vector<float> dequantized(const ReferenceInput& q, QuantFormat f, std::int64_t rows, std::int64_t cols,
                                      std::string_view op, std::uint32_t node) {
    check(q.dtype() == DType::U8, op.data(), "node {}: blocks must be u8, got {}", node, name_of(q.dtype()));
    check_blocks(f, rows, cols, q.numel(), op, node);
    std::vector<std::byte> bytes(static_cast<std::size_t>(q.numel()));
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(q.i(static_cast<std::int64_t>(i)));
    std::vector<float> out(static_cast<std::size_t>(rows * cols));
    io::dequantize_blocks(f, bytes, out);
    return out;
}

inline std::string describe(QuantFormat f, std::int64_t rows, std::int64_t cols) {
    return fmt::format("{} [{}, {}]", io::name_of(f), rows, cols);
}

}  // namespace quantized_detail

// x rounded as Q8 activations are: per block of 32, d = max|x| / 127 (f32),
// q = round-half-away(x / d), value q * d. Reference semantics of Activations::Q8.
inline void round_to_q8_blocks(std::vector<double>& row) {
    for (std::size_t b = 0; b + kQuantBlock <= row.size(); b += kQuantBlock) {
        float amax = 0;
        for (std::int64_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(static_cast<float>(row[b + i])));
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        for (std::int64_t i = 0; i < kQuantBlock; ++i)
            row[b + i] = static_cast<double>(std::round(static_cast<float>(row[b + i]) * id)) * static_cast<double>(d);
    }
}

struct DequantizeOp {
    static constexpr std::string_view name = "Dequantize";
    QuantFormat format = QuantFormat::Q8_0;
    std::int64_t rows = 0, cols = 0;
    // Whether products with this weight may round their activations to 8 bits
    // (QuantizedMatmul's Activations::Q8 is then an alternative).
    bool q8_activations = true;
    bool operator==(const DequantizeOp&) const = default;
    std::size_t hash() const {
        return static_cast<std::size_t>(format) * 1000003u ^ static_cast<std::size_t>(rows) * 7919u ^
               static_cast<std::size_t>(cols) ^ (q8_activations ? 1u << 30 : 0u);
    }
    std::string attributes() const {
        return quantized_detail::describe(format, rows, cols) + (q8_activations ? " q8-activations" : "");
    }
    Shape shape(std::span<const ShapeTracker>) const { return {Expression(rows), Expression(cols)}; }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    void reference(const ReferenceCall& call) const {
        const auto values = quantized_detail::dequantized(call.inputs[0], format, rows, cols, name, call.node);
        for (std::size_t i = 0; i < values.size(); ++i) call.out.store_double(i, values[i]);
    }
};

enum class Activations : std::uint8_t { F32, Q8 };

// How a backend holds the weight of a product. The op's input is the file's
// blocks either way (so both compute the same), but Interleaved8 lets the
// backend repack them once, at load, with 8 rows interleaved (the CPU:
// cpu/quant_interleaved.hpp, quant_interleaved_k.hpp): every block format, any
// matrix of 8 rows or more (the rows after the last whole group stay blocks).
enum class WeightLayout : std::uint8_t { Blocks, Interleaved8 };
constexpr bool can_interleave(QuantFormat f, std::int64_t rows) { return rows >= 8 && is_block_quantized(f); }

struct QuantizedMatmulOp {
    static constexpr std::string_view name = "QuantizedMatmul";
    QuantFormat format = QuantFormat::Q8_0;
    std::int64_t rows = 0, cols = 0;  // of the weight b
    Activations activations = Activations::F32;
    WeightLayout layout = WeightLayout::Blocks;
    bool operator==(const QuantizedMatmulOp&) const = default;
    std::size_t hash() const {
        return static_cast<std::size_t>(format) * 1000003u ^ static_cast<std::size_t>(rows) * 7919u ^
               static_cast<std::size_t>(cols) ^ static_cast<std::size_t>(activations) << 40 ^
               static_cast<std::size_t>(layout) << 44;
    }
    std::string attributes() const {
        return quantized_detail::describe(format, rows, cols) +
               (activations == Activations::Q8 ? " activations q8" : " activations f32") +
               (layout == WeightLayout::Interleaved8 ? " interleaved8" : "");
    }
    // [.., m, cols] x blocks -> [.., m, rows]
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape out = inputs[0].dims();
        out.back() = Expression(rows);
        return out;
    }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    // Integer block products do about twice the work per cycle of f32 FMAs;
    // interleaved rows save the horizontal sums and apply 8 rows' scales per
    // instruction (a quarter less, the repack being once per load).
    double flops(const OpCostQuery& q) const {
        const double f = 2 * q.elements(q.shape) * static_cast<double>(cols);
        const double per_layout = layout == WeightLayout::Interleaved8 && activations == Activations::Q8 ? 0.75 : 1;
        return (activations == Activations::Q8 ? f / 2 : f) * per_layout;
    }
    void reference(const ReferenceCall& call) const {
        const ReferenceInput& a = call.inputs[0];
        check(a.rank() >= 1 && a.dim(a.rank() - 1) == cols, name.data(), "node {}: activations have {} columns, the "
              "weight {}", call.node, a.rank() ? a.dim(a.rank() - 1) : 0, cols);
        const auto w = quantized_detail::dequantized(call.inputs[1], format, rows, cols, name, call.node);
        const std::int64_t m = cols == 0 ? 0 : a.numel() / cols;
        std::vector<double> x(static_cast<std::size_t>(cols));
        for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t e = 0; e < cols; ++e) x[e] = a.f(i * cols + e);
            if (activations == Activations::Q8) round_to_q8_blocks(x);
            for (std::int64_t j = 0; j < rows; ++j) {
                double acc = 0;
                for (std::int64_t e = 0; e < cols; ++e) acc += x[e] * w[j * cols + e];
                call.out.store_double(static_cast<std::size_t>(i * rows + j), acc);
            }
        }
    }
};

struct QuantizedGatherOp {
    static constexpr std::string_view name = "QuantizedGather";
    QuantFormat format = QuantFormat::Q8_0;
    std::int64_t rows = 0, cols = 0;
    bool operator==(const QuantizedGatherOp&) const = default;
    std::size_t hash() const {
        return static_cast<std::size_t>(format) * 1000003u ^ static_cast<std::size_t>(rows) * 7919u ^
               static_cast<std::size_t>(cols);
    }
    std::string attributes() const { return quantized_detail::describe(format, rows, cols); }
    // (blocks, indexes) -> the indexes' shape
    Shape shape(std::span<const ShapeTracker> inputs) const { return inputs[1].dims(); }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    void reference(const ReferenceCall& call) const {
        const auto w = quantized_detail::dequantized(call.inputs[0], format, rows, cols, name, call.node);
        const ReferenceInput& idx = call.inputs[1];
        for (std::int64_t i = 0; i < idx.numel(); ++i) {
            const std::int64_t at = idx.i(i);
            check(at >= 0 && at < rows * cols, name.data(), "node {}: index {} at {} is outside the {} elements of "
                  "the weight", call.node, at, i, rows * cols);
            call.out.store_double(static_cast<std::size_t>(i), w[static_cast<std::size_t>(at)]);
        }
    }
};

}  // namespace luminal

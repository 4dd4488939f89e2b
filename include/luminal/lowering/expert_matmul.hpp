#pragma once
// ExpertMatmul: the products of a mixture of experts, each row with the
// expert its router picked, reading the stacked weights where they are:
//
//   out[r, n] = sum over k of x[r, k] * W[experts[r], n, k]
//
// Inputs: x (R rows of K, in element order: any view of R * K elements),
// W [E, N, K] (f32, f16 or bf16, read through its view), experts [R]
// (integers in [0, E)). The output is f32, [R, N] in element order (the rule
// that finds the op gives it the shape of the Matmul it stands for). With
// `quant`, W is the u8 blocks of E stacked [N, K] matrices of that format,
// read as QuantizedMatmul reads one (its activations f32 or rounded to Q8).
//
// A model writes this as W.index_select(0, experts) then a batched Matmul,
// which copies every row's expert (in f32: twice its bf16 bytes) before
// reading it again; lowering/expert_rules.hpp finds that form. A backend's
// kernel reads each chosen expert once however many rows chose it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "luminal/graph/backend_op.hpp"
#include "luminal/lowering/quantized.hpp"

namespace luminal {

struct ExpertMatmulOp {
    static constexpr std::string_view name = "ExpertMatmul";
    std::optional<QuantizedMatmulOp> quant;  // rows, cols: one expert's matrix
    bool operator==(const ExpertMatmulOp&) const = default;
    std::size_t hash() const { return 0x45787065u ^ (quant ? quant->hash() * 31 : 0); }
    std::string attributes() const { return quant ? quant->attributes() : std::string(); }

    Shape shape(std::span<const ShapeTracker> inputs) const {
        return {inputs[2].dim(0), quant ? Expression(quant->rows) : inputs[1].dim(1)};
    }
    DType dtype(std::span<const DType>) const { return DType::F32; }
    double flops(const OpCostQuery& q) const {
        const double k = quant ? static_cast<double>(quant->cols)
                               : static_cast<double>(std::max<std::int64_t>(q.inputs[1].dim(2).eval(q.dims), 0));
        const double f = 2 * q.elements(q.shape) * k;
        return quant && quant->activations == Activations::Q8 ? f / 2 : f;
    }

    // Accumulated in double, rounded to f32 once.
    void reference(const ReferenceCall& call) const {
        const ReferenceInput &x = call.inputs[0], &w = call.inputs[1], &experts = call.inputs[2];
        check(quant || w.rank() == 3, name.data(), "node {}: the weights must be [experts, out, in], got rank {}",
              call.node, w.rank());
        const std::int64_t n = quant ? quant->rows : w.dim(1), k = quant ? quant->cols : w.dim(2);
        const std::int64_t matrix = quant ? quantized_bytes(quant->format, n, k) : n * k;
        const std::int64_t count = quant ? (matrix > 0 ? w.numel() / matrix : 0) : w.dim(0), rows = experts.numel();
        check(!quant || w.numel() == count * matrix, name.data(), "node {}: {} bytes of blocks are not whole {} "
              "matrices of {} bytes", call.node, w.numel(), quantized_detail::describe(quant ? quant->format : QuantFormat::Q8_0, n, k), matrix);
        check(x.numel() == rows * k, name.data(), "node {}: {} rows of {} inputs need {} activations, got {}", call.node,
              rows, k, rows * k, x.numel());
        check(static_cast<std::int64_t>(call.out.size()) == rows * n, name.data(),
              "node {}: {} rows of {} outputs, but the node has {} elements", call.node, rows, n, call.out.size());
        std::vector<float> decoded;
        if (quant) decoded = quantized_detail::dequantized(w, quant->format, count * n, k, name, call.node);
        auto weight = [&](std::int64_t at) { return quant ? static_cast<double>(decoded[static_cast<std::size_t>(at)]) : w.f(at); };
        std::vector<double> row(static_cast<std::size_t>(k));
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t e = experts.i(r);
            check(e >= 0 && e < count, name.data(), "node {}: row {} picks expert {}, outside [0, {})", call.node, r, e,
                  count);
            for (std::int64_t i = 0; i < k; ++i) row[i] = x.f(r * k + i);
            if (quant && quant->activations == Activations::Q8) round_to_q8_blocks(row);
            for (std::int64_t o = 0; o < n; ++o) {
                double acc = 0;
                for (std::int64_t i = 0; i < k; ++i) acc += row[i] * weight((e * n + o) * k + i);
                call.out.store_double(static_cast<std::size_t>(r * n + o), acc);
            }
        }
    }
};

}  // namespace luminal

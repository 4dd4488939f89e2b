#pragma once
// cuda.Gemv: the products of a few activation rows with one or more weight
// matrices read in place, out[t, n] = epilogue(acc_0[t, n], .., acc_m[t, n],
// extra inputs at [t, n]) with acc_j[t, n] = sum_k a[t, k] * W_j[n, k]. The
// activation rows a are either input 0 read through its view, or computed
// per row by a prologue (a row op: RMSNorm folded into the product that
// reads it); the epilogue is a fused elementwise program over the
// accumulators and the remaining inputs (a residual add, SiLU(gate) * up).
// Inputs: the activation inputs, then the weights ([N, K] each, K contiguous),
// then the epilogue's inputs. Without a prologue the activation is read by
// element index (row t, column k at t * K + k), so its view may have other dims.
// With `quant` the weights are ggml blocks (u8, all of that format and
// [rows, cols]), read as QuantizedMatmul reads them: the quantized decode
// GEMV takes the same prologue and epilogues as the 16-bit one.
#include <memory>
#include <optional>
#include <string_view>

#include "luminal/cuda/row_op.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/lowering/quantized.hpp"

namespace luminal::cuda {

// How a warp walks the rows: `rows` rows at a time, `unroll` 16-byte loads
// of each row in flight per lane before the first product.
struct GemvLayout {
    std::uint8_t rows = 1, unroll = 4;
    friend bool operator==(const GemvLayout&, const GemvLayout&) = default;
};

struct GemvOp {
    static constexpr std::string_view name = "cuda.Gemv";
    std::optional<RowOp> prologue;  // none: input 0 is the activation
    std::uint16_t activation_inputs = 1;
    std::uint16_t weights = 1;
    std::shared_ptr<const FusedProgram> epilogue;  // slots: the accumulators, then the epilogue inputs; null: acc_0
    GemvLayout layout;
    std::optional<QuantizedMatmulOp> quant;  // none: 16-bit or f32 weights read as stored

    bool operator==(const GemvOp& o) const {
        return prologue == o.prologue && activation_inputs == o.activation_inputs && weights == o.weights &&
               layout == o.layout && same_program(epilogue, o.epilogue) && quant == o.quant;
    }
    std::size_t hash() const {
        std::size_t h = 0x6E3Au ^ (std::size_t{activation_inputs} << 8) ^ (std::size_t{weights} << 16) ^
                        (std::size_t{layout.rows} << 24) ^ (std::size_t{layout.unroll} << 32);
        if (prologue) h = (h ^ prologue->hash()) * 0x100000001B3ull;
        if (epilogue) h = (h ^ FusedElementwiseOp{epilogue}.hash()) * 0x9E3779B97F4A7C15ull;
        if (quant) h = (h ^ quant->hash()) * 0xC2B2AE3D27D4EB4Full;
        return h;
    }
    std::string attributes() const {
        return fmt::format("{}weights={} rows/warp={} loads/row={}{}{}",
                           quant ? fmt::format("QuantizedMatmul {} ", quant->attributes()) : std::string(), weights, layout.rows, layout.unroll,
                           prologue ? ", prologue: " + prologue->attributes() : std::string(),
                           epilogue ? fmt::format(", epilogue steps={}", epilogue->steps.size()) : std::string());
    }
    // [.., S, K] activations (the activation inputs' index space) times [N, K] -> [.., S, N].
    Shape shape(std::span<const ShapeTracker> inputs) const {
        Shape out = inputs[0].dims();
        out.back() = quant ? Expression(quant->rows) : inputs[activation_inputs].dim(0);
        return out;
    }
    DType dtype(std::span<const DType>) const { return epilogue ? epilogue->steps.back().dtype : DType::F32; }
    double flops(const OpCostQuery& q) const {
        const double k = quant ? static_cast<double>(quant->cols) : static_cast<double>(q.inputs[activation_inputs].dim(1).eval(q.dims));
        return q.elements(q.shape) * (2 * k * weights + (epilogue ? static_cast<double>(epilogue->steps.size()) : 0));
    }

    // The activation rows as the prologue (or input 0) gives them, in f32
    // (rounded to 8-bit blocks for quantized Activations::Q8); each product
    // accumulated in double and rounded to f32 once; then the epilogue.
    void reference(const ReferenceCall& call) const {
        const ReferenceInput& first = call.inputs[0];
        const std::int64_t k = quant ? quant->cols : call.inputs[activation_inputs].dim(1);
        const std::int64_t rows = k > 0 ? first.numel() / k : 0;
        HostBuffer activation(DType::F32, static_cast<std::size_t>(rows * k));
        if (prologue)
            prologue->reference(ReferenceCall{call.inputs.first(activation_inputs), activation, call.dims, call.node});
        else
            for (std::int64_t e = 0; e < rows * k; ++e) activation.store_double(static_cast<std::size_t>(e), first.f(e));
        if (quant && quant->activations == Activations::Q8)
            for (std::int64_t t = 0; t < rows; ++t) {
                std::vector<double> row(static_cast<std::size_t>(k));
                for (std::int64_t e = 0; e < k; ++e) row[e] = activation.as_double(static_cast<std::size_t>(t * k + e));
                round_to_q8_blocks(row);
                for (std::int64_t e = 0; e < k; ++e) activation.store_double(static_cast<std::size_t>(t * k + e), row[e]);
            }
        const std::int64_t n = quant ? quant->rows : call.inputs[activation_inputs].dim(0);
        std::vector<HostBuffer> accumulators;
        for (std::uint16_t j = 0; j < weights; ++j) {
            const ReferenceInput& w = call.inputs[activation_inputs + j];
            std::vector<float> decoded;
            if (quant) decoded = quantized_detail::dequantized(w, quant->format, n, k, name, call.node);
            auto weight = [&](std::int64_t at) { return quant ? static_cast<double>(decoded[static_cast<std::size_t>(at)]) : w.f(at); };
            HostBuffer acc(DType::F32, static_cast<std::size_t>(rows * n));
            for (std::int64_t t = 0; t < rows; ++t)
                for (std::int64_t o = 0; o < n; ++o) {
                    double sum = 0;
                    for (std::int64_t e = 0; e < k; ++e)
                        sum += activation.as_double(static_cast<std::size_t>(t * k + e)) * weight(o * k + e);
                    acc.store_double(static_cast<std::size_t>(t * n + o), sum);
                }
            accumulators.push_back(std::move(acc));
        }
        if (!epilogue) {
            for (std::size_t e = 0; e < call.out.size(); ++e) call.out.copy_element(e, accumulators[0], e);
            return;
        }
        const ShapeTracker out_view(Shape{Expression(rows), Expression(n)});
        std::vector<ReferenceInput> inputs;
        for (const HostBuffer& acc : accumulators) inputs.emplace_back(acc, out_view, call.dims, call.node);
        for (std::size_t i = activation_inputs + weights; i < call.inputs.size(); ++i) inputs.push_back(call.inputs[i]);
        FusedElementwiseOp{epilogue}.reference(ReferenceCall{inputs, call.out, call.dims, call.node});
    }
};

}  // namespace luminal::cuda

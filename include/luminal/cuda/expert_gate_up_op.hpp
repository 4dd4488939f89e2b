#pragma once
// cuda.ExpertGateUp: the two products of a gated mixture of experts in one
// expert GEMV, out[r, n] = epilogue(gate[r, n], up[r, n]) with
// gate = ExpertMatmul(x, W_gate, experts) and up = ExpertMatmul(x, W_up,
// experts): each warp streams an expert's gate and up rows together and
// applies the epilogue (SiLU(gate) * up, GELU(gate) * up) to its sums, so the
// two products are one launch and neither is written. Inputs: x, W_gate,
// W_up, experts, read as ExpertMatmul reads them (as ggml blocks with
// `quant`). Found by expert_gate_up_rules.hpp in the fused region that reads
// the two products.
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "luminal/lowering/expert_matmul.hpp"
#include "luminal/lowering/fused_elementwise.hpp"

namespace luminal::cuda {

struct ExpertGateUpOp {
    static constexpr std::string_view name = "cuda.ExpertGateUp";
    std::optional<QuantizedMatmulOp> quant;
    std::shared_ptr<const FusedProgram> epilogue;  // slots: the gate and up products

    bool operator==(const ExpertGateUpOp& o) const { return quant == o.quant && FusedElementwiseOp{epilogue} == FusedElementwiseOp{o.epilogue}; }
    std::size_t hash() const { return (FusedElementwiseOp{epilogue}.hash() ^ (quant ? quant->hash() : 0)) * 0x9E3779B97F4A7C15ull ^ 0x6A7Eu; }
    std::string attributes() const {
        return fmt::format("{}epilogue steps={}", quant ? quant->attributes() + " " : std::string(), epilogue->steps.size());
    }
    Shape shape(std::span<const ShapeTracker> inputs) const { return ExpertMatmulOp{quant}.shape(std::array{inputs[0], inputs[1], inputs[3]}); }
    DType dtype(std::span<const DType>) const { return epilogue->steps.back().dtype; }
    double flops(const OpCostQuery& q) const {
        const std::array views{q.inputs[0], q.inputs[1], q.inputs[3]};
        return 2 * ExpertMatmulOp{quant}.flops(OpCostQuery{views, q.shape, q.dtype, q.dims});
    }

    // The two products as ExpertMatmul computes them, then the epilogue as the fused region computed it.
    void reference(const ReferenceCall& call) const {
        std::vector<HostBuffer> products;
        for (std::size_t w : {1u, 2u}) {
            HostBuffer& product = products.emplace_back(DType::F32, call.out.size());
            const ReferenceInput inputs[] = {call.inputs[0], call.inputs[w], call.inputs[3]};
            ExpertMatmulOp{quant}.reference(ReferenceCall{inputs, product, call.dims, call.node});
        }
        const ShapeTracker whole(Shape{Expression(static_cast<std::int64_t>(call.out.size()))});
        const ReferenceInput combined[] = {ReferenceInput(products[0], whole, call.dims, call.node),
                                           ReferenceInput(products[1], whole, call.dims, call.node)};
        FusedElementwiseOp{epilogue}.reference(ReferenceCall{combined, call.out, call.dims, call.node});
    }
};

}  // namespace luminal::cuda

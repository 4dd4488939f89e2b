#pragma once
// The CUDA ops that run as custom kernels (custom_kernel.hpp), and the kernel of each.
#include <memory>
#include <span>

#include "luminal/cuda/argsort_kernel.hpp"
#include "luminal/cuda/attention_kernel.hpp"
#include "luminal/cuda/dequantize_kernel.hpp"
#include "luminal/cuda/expert_gate_up_op.hpp"
#include "luminal/cuda/expert_gemm_kernel.hpp"
#include "luminal/cuda/expert_gemv_kernel.hpp"
#include "luminal/cuda/flash_attention_kernel.hpp"
#include "luminal/cuda/gemv_kernel.hpp"
#include "luminal/cuda/sample_kernel.hpp"

namespace luminal::cuda {

inline std::shared_ptr<const CustomKernel> custom_kernel_for(const NodeSpec& spec, std::span<const DType> dtypes,
                                                             std::uint32_t node) {
    if (const auto* gemv = spec.payload_as<GemvOp>()) return gemv_kernel(spec, *gemv, dtypes, node);
    if (const auto* attention = spec.payload_as<AttentionOp>()) return attention_kernel(spec, *attention, dtypes, node);
    if (const auto* flash = spec.payload_as<FlashAttentionOp>()) return flash_attention_kernel(spec, *flash, dtypes, node);
    if (const auto* product = spec.payload_as<ExpertMatmulOp>()) return expert_gemv_kernel(spec, product->quant, 1, nullptr, dtypes, node);
    if (const auto* gate_up = spec.payload_as<ExpertGateUpOp>())
        return expert_gemv_kernel(spec, gate_up->quant, 2, gate_up->epilogue.get(), dtypes, node);
    if (spec.payload_as<ExpertGemmOp>()) return expert_gemm_kernel(spec, dtypes, node);
    if (const auto* sample = spec.payload_as<SampleTokenOp>()) return sample_kernel(spec, *sample, dtypes, node);
    if (const auto* sort = spec.payload_as<ArgsortOp>()) return argsort_kernel(spec, *sort, dtypes, node);
    if (const auto* product = spec.payload_as<QuantizedMatmulOp>()) {
        GemvOp gemv;
        gemv.quant = *product;
        return gemv_kernel(spec, gemv, dtypes, node);
    }
    if (const auto* deq = spec.payload_as<DequantizeOp>())
        return dequantize_kernel(spec, deq->format, deq->rows, deq->cols, false, dtypes, node);
    if (const auto* lookup = spec.payload_as<QuantizedGatherOp>())
        return dequantize_kernel(spec, lookup->format, lookup->rows, lookup->cols, true, dtypes, node);
    return nullptr;
}

}  // namespace luminal::cuda

#pragma once
// The Llama-3.1-8B shape as the CUDA backend plans it (bf16 weights and
// cache, activations rounded to bf16 at the products, as generate's default
// on cuda), compiled on the host emulator without weights, with the plan
// report of one step: a decode step (s = 1, p = 1024) or a prompt.
#include <luminal/cuda.hpp>
#include <luminal/cuda/plan_report.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/step_floor.hpp>

#include <optional>

#include "../test_data.hpp"

namespace luminal_test {

struct Llama8bDecodePlan {
    luminal::Program program;
    luminal::cuda::PlanReport report;
};

// `layers` of the config's (0: all of them); `read_sass`: compile every kernel to read its facts; `quantized`:
// every matrix kept in that block format, products rounding their activations to 8-bit blocks (as generate --quant).
inline Llama8bDecodePlan llama8b_decode_plan(std::size_t layers, bool read_sass, std::int64_t tokens = 1, std::int64_t cached = 1024,
                                             std::optional<luminal::QuantFormat> quantized = std::nullopt) {
    using namespace luminal;
    io::ModelConfig config = io::load_model_config(data_dir() / "configs" / "llama31_8b");
    if (layers > 0) config.layers.resize(layers);
    nn::ModelOptions options;
    options.context = 2048;
    options.weight_dtype = DType::BF16;
    options.kv_dtype = DType::BF16;
    options.last_logits_only = true;
    options.sample_in_graph = true;
    options.narrow_activations = true;
    if (quantized) {
        options.q8_activations = true;
        const nn::CausalLm unquantized = nn::build_causal_lm(config, options);
        for (const nn::Parameter& p : unquantized.parameters.parameters())
            if (p.shape.size() == 2 && p.computed.empty() && p.shape.back() % block_elements(*quantized) == 0)
                options.quantized.emplace(p.name, *quantized);
    }
    nn::CausalLm model = nn::build_causal_lm(config, options);
    CompileOptions compile;
    compile.verbosity = 0;
    nn::Session session(model, cuda::HostEmulator{}, compile);
    const DynMap step{{'s', tokens}, {'p', cached}};
    cuda::PlanReportOptions report_options;
    report_options.layers = static_cast<std::int64_t>(config.layers.size());
    report_options.floor_bytes = nn::step_floor_bytes(model, cached, tokens);
    report_options.floor_flops = nn::step_floor_flops(model, cached, tokens);
    report_options.registers = read_sass;
    Program program = session.report().program.for_dims(step);
    cuda::PlanReport report = cuda::plan_report(program, step, report_options);
    return {std::move(program), std::move(report)};
}

}  // namespace luminal_test

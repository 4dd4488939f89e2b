#pragma once
// The bundled families, by config: build_causal_lm picks the family's builder.
#include "luminal/nn/gemma3.hpp"
#include "luminal/nn/gemma4.hpp"
#include "luminal/nn/llama.hpp"
#include "luminal/nn/qwen3.hpp"
#include "luminal/nn/qwen3_moe.hpp"

namespace luminal::nn {

inline CausalLm build_causal_lm(const io::ModelConfig& config, const ModelOptions& options = {}) {
    switch (config.family) {
        case io::ModelFamily::Llama: return build_llama(config, options);
        case io::ModelFamily::Qwen3: return build_qwen3(config, options);
        case io::ModelFamily::Qwen3Moe: return build_qwen3_moe(config, options);
        case io::ModelFamily::Gemma3: return build_gemma3(config, options);
        case io::ModelFamily::Gemma4: return build_gemma4(config, options);
    }
    throw Error("build_causal_lm", "unknown model family");
}

}  // namespace luminal::nn

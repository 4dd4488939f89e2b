#pragma once
// Gated MLP: down(act(gate(x)) * up(x)), SwiGLU (silu) or GeGLU (tanh GELU).
#include "luminal/core/error.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/nn/linear.hpp"

#include <string>

namespace luminal::nn {

enum class Activation { Silu, GeluTanh, Gelu };

inline Activation activation_named(const std::string& name) {
    if (name == "silu" || name == "swish") return Activation::Silu;
    if (name == "gelu_pytorch_tanh" || name == "gelu_new") return Activation::GeluTanh;
    if (name == "gelu") return Activation::Gelu;
    throw Error("config.json", fmt::format("activation '{}' is not supported (silu, gelu, gelu_pytorch_tanh)", name));
}

inline GraphTensor activate(const GraphTensor& x, Activation activation) {
    switch (activation) {
        case Activation::Silu: return x.silu();
        case Activation::GeluTanh: return x.gelu_tanh();
        case Activation::Gelu: return x.gelu();
    }
    return x;
}

struct GatedMlp {
    Linear gate, up, down;
    Activation activation = Activation::Silu;

    static GatedMlp create(ParameterSet& params, Graph& cx, const std::string& prefix, std::int64_t hidden,
                           std::int64_t intermediate, Activation activation, bool bias = false,
                           DType dtype = DType::F32) {
        return {Linear::create(params, cx, prefix + ".gate_proj", hidden, intermediate, bias, dtype),
                Linear::create(params, cx, prefix + ".up_proj", hidden, intermediate, bias, dtype),
                Linear::create(params, cx, prefix + ".down_proj", intermediate, hidden, bias, dtype), activation};
    }

    GraphTensor operator()(const GraphTensor& x) const { return down(activate(gate(x), activation) * up(x)); }
};

}  // namespace luminal::nn

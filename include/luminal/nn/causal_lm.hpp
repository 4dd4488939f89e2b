#pragma once
// What every bundled model is: a graph from token ids ([s] i32, input
// "input_ids") to logits ([s, vocab] f32, an output), for s new tokens after p
// cached ones (the dims 's' and 'p'), with its parameters (HF tensor names)
// and its per-layer KV caches. The family headers build one from a config.
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/io/model_config.hpp"
#include "luminal/lowering/quantized.hpp"
#include "luminal/lowering/sample_token.hpp"
#include "luminal/nn/kv_cache.hpp"
#include "luminal/nn/parameters.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

namespace luminal::nn {

struct ModelOptions {
    std::int64_t context = 512;            // tokens the KV caches hold (prompt + generated)
    DType weight_dtype = DType::F32;       // storage of matrices; compute is f32 unless narrow_activations
    // Weight matrices kept in their block format (HF name -> format; a GGUF
    // file's from nn::quantized_weights): the graph reads the blocks through
    // Dequantize, and the CPU multiplies the blocks as they are.
    std::map<std::string, QuantFormat, std::less<>> quantized{};
    // Whether products with those weights may round their activations to
    // 8-bit blocks (as llama.cpp does): faster, and no longer exactly the
    // dequantized weights' result.
    bool q8_activations = true;
    // Whether products with f16/bf16 weights round their activations to the
    // weights' dtype first, as a 16-bit model run by transformers does: the
    // product is then of two 16-bit matrices with f32 accumulation, which a
    // GPU runs on its tensor cores (cuBLASLt) without widening the weights.
    bool narrow_activations = false;
    // Logits of the last new token only ([1, vocab]): what generation needs,
    // and the LM head then runs on one row instead of the whole prompt.
    bool last_logits_only = false;
    // The KV caches' dtype: f16/bf16 halve their memory and the bytes attention reads.
    DType kv_dtype = DType::F32;
    // The next token picked in the graph (SampleToken: greedy, or temperature
    // and top-k), so a runtime on a device returns its id instead of the logits.
    bool sample_in_graph = false;
};

// The inputs and output of the in-graph pick (ModelOptions::sample_in_graph).
struct TokenSampling {
    GraphTensor bias;      // [vocab] f32: 0, or -inf for ids never to be picked
    GraphTensor settings;  // [3] f32: temperature, top_k, seed
    GraphTensor token;     // [rows] i32, an output
};

struct CausalLm {
    io::ModelConfig config;
    ModelOptions options;
    std::unique_ptr<Graph> graph;  // on the heap: tensors keep pointing at it when the model moves
    ParameterSet parameters;
    KvCaches caches;
    GraphTensor input_ids;
    GraphTensor logits;
    // Checkpoint tensors the model may leave unread (a multimodal file's vision tower).
    std::function<bool(std::string_view)> ignorable;
    std::optional<TokenSampling> sampling;  // with ModelOptions::sample_in_graph

    static Expression new_tokens() { return Expression('s'); }
    static Expression cached_tokens() { return Expression('p'); }
};

// What a family's block sees while the model is built.
struct ModelBuilder {
    const io::ModelConfig& config;
    const ModelOptions& options;
    Graph& graph;
    ParameterSet& parameters;
    KvCaches& caches;
    std::optional<GraphTensor> input_ids;  // [s] i32, set before the first block
};

}  // namespace luminal::nn

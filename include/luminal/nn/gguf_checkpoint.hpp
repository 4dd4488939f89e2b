#pragma once
// A GGUF file (architectures llama, qwen2, qwen3, qwen3moe, gemma3) seen as a Hugging Face
// checkpoint: llama.cpp's tensor names mapped back to transformers'
// (blk.3.attn_q.weight -> model.layers.3.self_attn.q_proj.weight), quantized
// tensors dequantized to f32, and for llama the rows of the Q and K projections
// put back in Hugging Face order. rope_freqs.weight is not a weight: the config
// holds it. A MoE layer's stacked experts (ffn_gate_exps [experts, out, in]) are
// seen as one tensor per expert, as transformers names them
// (mlp.experts.3.gate_proj.weight). Gemma 3's converter stores every RMSNorm
// weight as 1 + w (llama.cpp's norm scales by the weight itself, transformers'
// Gemma3RMSNorm by 1 + w), so 1 is taken off again. Matrices in a block format
// luminal keeps quantized (is_block_quantized) are also given as their blocks
// (blocks()), read in place from the mapped file when `owner` keeps it alive;
// Q/K rows are reordered block row by block row.
//
// Why the reordering: transformers rotates the two halves of each head
// (dimension j with j + d/2), llama.cpp rotates neighbouring pairs (2j with
// 2j+1), so llama.cpp's converter permutes the rows of attn_q and attn_k per
// head: GGUF row h*d + 2j + t holds Hugging Face row h*d + t*d/2 + j (t = 0, 1).
// The inverse makes our split-half RoPE compute what llama.cpp computes. Qwen
// files keep transformers' order (llama.cpp rotates their halves, as "NEOX").
#include "luminal/core/error.hpp"
#include "luminal/io/gguf.hpp"
#include "luminal/io/model_config.hpp"
#include "luminal/lowering/quantized.hpp"
#include "luminal/nn/checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::nn {

class GgufCheckpoint {
public:
    // `config` (from the same file) gives the head counts the Q/K reordering needs.
    GgufCheckpoint(const io::GgufFile& file, const io::ModelConfig& config, std::shared_ptr<const void> owner = {})
        : file_(file), owner_(std::move(owner)) {
        for (const io::GgufTensor& tensor : file.tensors()) {
            if (tensor.name == "rope_freqs.weight") continue;  // read into the config's RoPE
            Entry entry{&tensor, 0, 0, 0.0f};
            const std::string name = hf_name(tensor.name, config, entry);
            const auto expert_at = name.find(expert_placeholder);
            if (expert_at == std::string::npos) {
                add(name, entry);
                continue;
            }
            check(tensor.dims.size() == 3 && tensor.dims.back() > 0, location().c_str(),
                  "tensor '{}' has {} dims, expected [experts > 0, out, in]", tensor.name, tensor.dims.size());
            for (std::int64_t e = 0; e < tensor.dims.back(); ++e) {
                std::string expert_name = name;
                expert_name.replace(expert_at, expert_placeholder.size(), std::to_string(e));
                add(expert_name, {&expert_slice(tensor, e), 0, 0, 0.0f});
            }
        }
    }

    std::string location() const { return file_.path().string(); }
    std::vector<std::string> tensor_names() const {
        std::vector<std::string> names;
        for (const auto& [name, entry] : entries_) names.push_back(name);
        return names;
    }
    std::optional<Dims> shape_of(std::string_view name) const {
        const auto it = entries_.find(name);
        if (it == entries_.end()) return std::nullopt;
        return it->second.tensor->shape();
    }
    // Stored bytes serve only tensors kept as they are: unquantized, not reordered, not shifted.
    std::optional<std::span<const std::byte>> bytes_as(std::string_view name, DType dtype) const {
        const Entry& entry = at(name);
        if (entry.heads != 0 || entry.shift != 0.0f) return std::nullopt;
        const io::GgufType type = entry.tensor->type;
        const bool same = (type == io::GgufType::F32 && dtype == DType::F32) ||
                          (type == io::GgufType::F16 && dtype == DType::F16) ||
                          (type == io::GgufType::BF16 && dtype == DType::BF16);
        if (same) return entry.tensor->bytes;
        return std::nullopt;
    }
    // HF names of the matrices whose blocks blocks() gives.
    std::map<std::string, QuantFormat, std::less<>> quantized_formats() const {
        std::map<std::string, QuantFormat, std::less<>> formats;
        for (const auto& [name, entry] : entries_)
            if (is_block_quantized(entry.tensor->type) && entry.tensor->dims.size() == 2)
                formats.emplace(name, entry.tensor->type);
        return formats;
    }

    // The stored blocks of matrix `name`, which must be of `format`.
    StoredBlocks blocks(std::string_view name, QuantFormat format) const {
        const Entry& entry = at(name);
        const io::GgufTensor& tensor = *entry.tensor;
        check(tensor.type == format && tensor.dims.size() == 2, location().c_str(),
              "tensor '{}' is {} with {} dims; the model expects a {} matrix", tensor.name, io::name_of(tensor.type),
              tensor.dims.size(), io::name_of(format));
        const std::int64_t rows = tensor.dims[1], cols = tensor.dims[0];
        const auto bytes = static_cast<std::size_t>(quantized_bytes(format, rows, cols));
        check(tensor.bytes.size() == bytes, location().c_str(), "tensor '{}' ({} [{}, {}]) has {} bytes, expected {}",
              tensor.name, io::name_of(format), rows, cols, tensor.bytes.size(), bytes);
        if (entry.heads == 0 && owner_) return {tensor.bytes, owner_};
        auto copy = std::make_shared<std::vector<std::byte>>(tensor.bytes.begin(), tensor.bytes.end());
        if (entry.heads != 0) unpermute_row_bytes(tensor.bytes, *copy, entry, name, bytes / static_cast<std::size_t>(rows));
        // The copy serves from now on: the file's pages just read are handed back
        // (read again from the file if touched), so they do not stay resident beside it.
        io::release_mapped_pages(tensor.bytes);
        return {*copy, copy};
    }

    std::vector<float> values(std::string_view name) const {
        const Entry& entry = at(name);
        std::vector<float> stored = io::dequantize(*entry.tensor);
        for (float& v : stored) v -= entry.shift;
        if (entry.heads == 0) return stored;
        return unpermute_rows(stored, entry, name);
    }

private:
    struct Entry {
        const io::GgufTensor* tensor;
        std::int64_t heads;     // nonzero: Q/K rows to reorder, per head of `head_dim` rows
        std::int64_t head_dim;
        float shift;            // subtracted from every value (Gemma 3's norms)
    };

    static constexpr std::string_view expert_placeholder = "{expert}";

    void add(const std::string& name, const Entry& entry) {
        const auto [it, inserted] = entries_.emplace(name, entry);
        if (!inserted)
            throw Error(location(), fmt::format("tensors '{}' and '{}' both map to '{}'", it->second.tensor->name,
                                                entry.tensor->name, name));
    }

    // Expert e of a stacked [experts, out, in] tensor: its rows are contiguous
    // (quantized blocks never cross a row), so the slice is a byte range.
    const io::GgufTensor& expert_slice(const io::GgufTensor& stacked, std::int64_t e) {
        const auto experts = stacked.dims.back();
        check(stacked.bytes.size() % static_cast<std::size_t>(experts) == 0, location().c_str(),
              "tensor '{}' has {} bytes, not a whole number per expert of {}", stacked.name, stacked.bytes.size(),
              experts);
        const std::size_t bytes = stacked.bytes.size() / static_cast<std::size_t>(experts);
        io::GgufTensor& slice = slices_.emplace_back(stacked);
        slice.name = fmt::format("{}[{}]", stacked.name, e);
        slice.dims.pop_back();
        slice.numel = stacked.numel / experts;
        slice.bytes = stacked.bytes.subspan(static_cast<std::size_t>(e) * bytes, bytes);
        return slice;
    }

    const Entry& at(std::string_view name) const {
        const auto it = entries_.find(name);
        check(it != entries_.end(), location().c_str(), "no tensor maps to '{}'", name);
        return it->second;
    }

    // The Hugging Face name of a GGUF tensor; names it does not know pass
    // through, so binding reports them as unused.
    static std::string hf_name(std::string_view gguf, const io::ModelConfig& config, Entry& entry) {
        const bool gemma3 = config.model_type == "gemma3";
        if (gemma3 && gguf.ends_with("norm.weight")) entry.shift = 1.0f;
        if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
        if (gguf == "output_norm.weight") return "model.norm.weight";
        if (gguf == "output.weight") return "lm_head.weight";
        constexpr std::string_view block = "blk.";
        if (!gguf.starts_with(block)) return std::string(gguf);
        std::string_view rest = gguf.substr(block.size());
        std::size_t layer = 0;
        const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
        if (error != std::errc{} || end == rest.data() + rest.size() || *end != '.' ||
            layer >= config.layers.size())
            return std::string(gguf);
        rest = rest.substr(static_cast<std::size_t>(end - rest.data()) + 1);
        const std::string prefix = "model.layers." + std::to_string(layer) + ".";
        const std::size_t dot = rest.rfind('.');
        if (dot == std::string_view::npos) return std::string(gguf);
        const std::string_view part = rest.substr(0, dot), suffix = rest.substr(dot);  // suffix: ".weight" / ".bias"
        const io::LayerConfig& shape = config.layers[layer];
        static const std::map<std::string_view, std::string_view, std::less<>> modules = {
            {"attn_norm", "input_layernorm"},        {"ffn_norm", "post_attention_layernorm"},
            {"attn_q", "self_attn.q_proj"},          {"attn_k", "self_attn.k_proj"},
            {"attn_v", "self_attn.v_proj"},          {"attn_output", "self_attn.o_proj"},
            {"ffn_gate", "mlp.gate_proj"},           {"ffn_up", "mlp.up_proj"},
            {"ffn_down", "mlp.down_proj"},          {"attn_q_norm", "self_attn.q_norm"},
            {"attn_k_norm", "self_attn.k_norm"},    {"ffn_gate_inp", "mlp.gate"},
            {"ffn_gate_exps", "mlp.experts.{expert}.gate_proj"},
            {"ffn_up_exps", "mlp.experts.{expert}.up_proj"},
            {"ffn_down_exps", "mlp.experts.{expert}.down_proj"}};
        // Gemma 3's four norms per layer: ffn_norm is the one before the MLP.
        static const std::map<std::string_view, std::string_view, std::less<>> gemma3_norms = {
            {"ffn_norm", "pre_feedforward_layernorm"},
            {"post_attention_norm", "post_attention_layernorm"},
            {"post_ffw_norm", "post_feedforward_layernorm"}};
        if (const auto norm = gemma3_norms.find(part); gemma3 && norm != gemma3_norms.end())
            return prefix + std::string(norm->second) + std::string(suffix);
        const auto module = modules.find(part);
        if (module == modules.end()) return std::string(gguf);
        const bool interleaved = config.model_type == "llama";
        if (interleaved && part == "attn_q") entry = {entry.tensor, config.num_attention_heads, shape.head_dim, 0.0f};
        if (interleaved && part == "attn_k") entry = {entry.tensor, shape.num_key_value_heads, shape.head_dim, 0.0f};
        return prefix + std::string(module->second) + std::string(suffix);
    }

    std::vector<float> unpermute_rows(const std::vector<float>& stored, const Entry& entry,
                                      std::string_view name) const {
        const Dims shape = entry.tensor->shape();
        const std::int64_t rows = shape.empty() ? 0 : shape.front();
        check(rows == entry.heads * entry.head_dim && rows > 0 && entry.head_dim % 2 == 0, location().c_str(),
              "tensor '{}' has {} rows, expected {} heads x {} (even) head size", name, rows, entry.heads,
              entry.head_dim);
        const std::int64_t columns = entry.tensor->numel / rows;
        const std::int64_t half = entry.head_dim / 2;
        std::vector<float> out(stored.size());
        for (std::int64_t h = 0; h < entry.heads; ++h)
            for (std::int64_t j = 0; j < half; ++j)
                for (std::int64_t t = 0; t < 2; ++t) {
                    const std::int64_t from = h * entry.head_dim + 2 * j + t;
                    const std::int64_t to = h * entry.head_dim + t * half + j;
                    std::copy_n(stored.begin() + from * columns, columns, out.begin() + to * columns);
                }
        return out;
    }

    // The reordering of unpermute_rows on rows of `row_bytes` stored bytes.
    void unpermute_row_bytes(std::span<const std::byte> stored, std::vector<std::byte>& out, const Entry& entry,
                             std::string_view name, std::size_t row_bytes) const {
        const std::int64_t rows = entry.tensor->shape().front();
        check(rows == entry.heads * entry.head_dim && entry.head_dim % 2 == 0, location().c_str(),
              "tensor '{}' has {} rows, expected {} heads x {} (even) head size", name, rows, entry.heads,
              entry.head_dim);
        const std::int64_t half = entry.head_dim / 2;
        for (std::int64_t h = 0; h < entry.heads; ++h)
            for (std::int64_t j = 0; j < half; ++j)
                for (std::int64_t t = 0; t < 2; ++t) {
                    const auto from = static_cast<std::size_t>(h * entry.head_dim + 2 * j + t);
                    const auto to = static_cast<std::size_t>(h * entry.head_dim + t * half + j);
                    std::copy_n(stored.begin() + static_cast<std::ptrdiff_t>(from * row_bytes), row_bytes,
                                out.begin() + static_cast<std::ptrdiff_t>(to * row_bytes));
                }
    }

    const io::GgufFile& file_;
    std::shared_ptr<const void> owner_;  // keeps file_'s mapping alive for blocks() read in place
    std::map<std::string, Entry, std::less<>> entries_;
    std::deque<io::GgufTensor> slices_;  // the experts of stacked tensors; a deque keeps them in place
};

}  // namespace luminal::nn

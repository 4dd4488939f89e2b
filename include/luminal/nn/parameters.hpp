#pragma once
// The weights a model declares while its graph is built, and their binding to
// a checkpoint. Each parameter is a named graph input with the HF tensor name
// and the shape the model expects; bind() checks the checkpoint against that
// list (a missing, extra or mis-shaped tensor is an Error naming the tensor and
// both shapes) and hands every tensor to the runtime, as stored when the dtypes
// match, converted exactly otherwise. A parameter may also be the stack of
// several checkpoint tensors (per-expert MoE weights), or values the model
// computes itself (RoPE frequencies), which no checkpoint holds. A matrix the
// model keeps quantized (quantize()) is an input of its u8 blocks, read
// through Dequantize; bind() hands the runtime the checkpoint's blocks.
#include "luminal/core/error.hpp"
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/graph/ops_custom.hpp"
#include "luminal/lowering/quantized.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/nn/checkpoint.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace luminal::nn {

struct Parameter {
    std::string name;
    GraphTensor tensor;
    Dims shape;
    // Checkpoint tensors stacked along a new first axis; empty: `name` itself.
    std::vector<std::string> stacked;
    // Values the model computes (no checkpoint tensor); used when non-empty.
    std::vector<float> computed;
    // Set: `tensor` is the u8 blocks of this format.
    std::optional<QuantFormat> format;
};

inline std::string shape_string(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

class ParameterSet {
public:
    // Matrices named here are kept in these formats; `q8_activations` as DequantizeOp's.
    void quantize(std::map<std::string, QuantFormat, std::less<>> formats, bool q8_activations) {
        quantized_ = std::move(formats);
        q8_activations_ = q8_activations;
    }

    // The parameter as f32 (or `dtype`); a quantized matrix as Dequantize of its blocks.
    GraphTensor add(Graph& cx, std::string name, Dims shape, DType dtype = DType::F32) {
        const auto format = quantized_.find(name);
        if (format == quantized_.end()) return push(cx, std::move(name), std::move(shape), dtype, {}, {});
        check(shape.size() == 2, "quantized weights", "'{}' is {}: only matrices are kept quantized", name,
              shape_string(shape));
        const std::int64_t bytes = quantized_bytes(format->second, shape[0], shape[1]);
        GraphTensor blocks = cx.named_tensor(name, {Expression(bytes)}, DType::U8);
        parameters_.push_back({name, blocks, shape, {}, {}, format->second});
        return custom_op(DequantizeOp{format->second, shape[0], shape[1], q8_activations_}, {blocks});
    }
    // One parameter holding checkpoint tensors `parts` (each of shape `part`) stacked.
    // Matrices whose parts are all kept in one block format are stacked as blocks,
    // [parts * rows, cols] read through Dequantize as [parts, rows, cols].
    GraphTensor add_stacked(Graph& cx, std::string name, std::vector<std::string> parts, const Dims& part,
                            DType dtype = DType::F32) {
        Dims shape{static_cast<std::int64_t>(parts.size())};
        shape.insert(shape.end(), part.begin(), part.end());
        const std::optional<QuantFormat> format = stacked_format(parts, part);
        if (!format) return push(cx, std::move(name), std::move(shape), dtype, std::move(parts), {});
        const std::int64_t rows = shape[0] * part[0];
        GraphTensor blocks = cx.named_tensor(name, {Expression(quantized_bytes(*format, rows, part[1]))}, DType::U8);
        parameters_.push_back({name, blocks, shape, std::move(parts), {}, *format});
        return custom_op(DequantizeOp{*format, rows, part[1], q8_activations_}, {blocks}).reshape({shape[0], part[0], part[1]});
    }
    GraphTensor add_computed(Graph& cx, std::string name, std::vector<float> values) {
        Dims shape{static_cast<std::int64_t>(values.size())};
        return push(cx, std::move(name), std::move(shape), DType::F32, {}, std::move(values));
    }

    // Whether products with 16-bit weights round their activations to the weights' dtype (ModelOptions).
    void narrow_activations(bool narrow) { narrow_activations_ = narrow; }
    bool narrows_activations() const { return narrow_activations_; }

    const std::vector<Parameter>& parameters() const { return parameters_; }

    // Checkpoint tensor names this set reads.
    std::set<std::string, std::less<>> checkpoint_names() const {
        std::set<std::string, std::less<>> names;
        for (const Parameter& p : parameters_) {
            if (!p.computed.empty()) continue;
            if (p.stacked.empty()) names.insert(p.name);
            names.insert(p.stacked.begin(), p.stacked.end());
        }
        return names;
    }

    // Binds every parameter from `weights`. Checkpoint tensors nobody reads are
    // an Error unless `ignorable(name)` (vision towers of multimodal files, say).
    template <typename Runtime, Checkpoint Weights>
    void bind(Runtime& rt, const Weights& weights, const std::function<bool(std::string_view)>& ignorable = {}) const {
        const auto wanted = checkpoint_names();
        std::vector<std::string> extra;
        for (const std::string& name : weights.tensor_names())
            if (!wanted.contains(name) && !(ignorable && ignorable(name))) extra.push_back(name);
        if (!extra.empty()) {
            const std::size_t shown = std::min<std::size_t>(extra.size(), 8);
            throw Error(weights.location(),
                        fmt::format("{} tensor(s) the model does not use: {}{}", extra.size(),
                                    fmt::join(extra.begin(), extra.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                                    extra.size() > shown ? ", ..." : ""));
        }
        for (const Parameter& p : parameters_) {
            if (!p.computed.empty()) {
                rt.set_data(p.tensor, p.computed);
            } else if (p.format && !p.stacked.empty()) {
                bind_stacked_blocks(rt, weights, p);
            } else if (p.format) {
                check_shape(weights, p.name, p.shape);
                if constexpr (requires { weights.blocks(p.name, *p.format); }) {
                    const StoredBlocks blocks = weights.blocks(p.name, *p.format);
                    if constexpr (requires { rt.borrow_bytes(p.tensor, blocks.bytes, blocks.owner); })
                        rt.borrow_bytes(p.tensor, blocks.bytes, blocks.owner);
                    else
                        rt.set_bytes(p.tensor, blocks.bytes);
                } else {
                    throw Error(weights.location(), fmt::format("'{}' is to be kept as {} blocks, but this checkpoint "
                                                                "holds no quantized tensors", p.name,
                                                                io::name_of(*p.format)));
                }
            } else if (p.stacked.empty()) {
                check_shape(weights, p.name, p.shape);
                if (borrow_mapped(rt, weights, p)) continue;
                if (const auto bytes = weights.bytes_as(p.name, p.tensor.dtype())) rt.set_bytes(p.tensor, *bytes);
                else rt.set_data(p.tensor, weights.values(p.name));
            } else {
                bind_stacked(rt, weights, p);
            }
        }
    }

private:
    // Lets the runtime read a tensor stored in its dtype where the checkpoint maps it.
    template <typename Runtime, Checkpoint Weights>
    static bool borrow_mapped(Runtime& rt, const Weights& weights, const Parameter& p) {
        if constexpr (requires { weights.mapped(p.name, p.tensor.dtype()); rt.borrow_bytes(p.tensor, {}, {}); }) {
            if (const auto stored = weights.mapped(p.name, p.tensor.dtype())) {
                rt.borrow_bytes(p.tensor, stored->bytes, stored->owner);
                return true;
            }
        }
        return false;
    }

    // Parts stored in the tensor's dtype are copied together as they are (a
    // mapped part's pages then go back to the kernel, so the parts are not
    // resident twice); others through their f32 values.
    template <typename Runtime, Checkpoint Weights>
    static void bind_stacked(Runtime& rt, const Weights& weights, const Parameter& p) {
        const Dims part(p.shape.begin() + 1, p.shape.end());
        const DType dtype = p.tensor.dtype();
        bool as_stored = true;
        for (const std::string& name : p.stacked) {
            check_shape(weights, name, part);
            as_stored = as_stored && weights.bytes_as(name, dtype).has_value();
        }
        if (!as_stored) {
            std::vector<float> values;
            for (const std::string& name : p.stacked) {
                const auto part_values = weights.values(name);
                values.insert(values.end(), part_values.begin(), part_values.end());
            }
            return rt.set_data(p.tensor, values);
        }
        std::vector<std::byte> bytes;
        for (const std::string& name : p.stacked) {
            const std::span<const std::byte> stored = *weights.bytes_as(name, dtype);
            if (bytes.empty()) bytes.reserve(stored.size() * p.stacked.size());
            bytes.insert(bytes.end(), stored.begin(), stored.end());
            if constexpr (requires { weights.mapped(name, dtype); })
                if (weights.mapped(name, dtype)) io::release_mapped_pages(stored);
        }
        rt.set_bytes(p.tensor, bytes);
    }

    // The one block format every part is kept in, if any (a mix is stacked as values).
    std::optional<QuantFormat> stacked_format(const std::vector<std::string>& parts, const Dims& part) const {
        if (part.size() != 2 || parts.empty()) return std::nullopt;
        const auto first = quantized_.find(parts[0]);
        if (first == quantized_.end()) return std::nullopt;
        for (const std::string& name : parts) {
            const auto it = quantized_.find(name);
            if (it == quantized_.end() || it->second != first->second) return std::nullopt;
        }
        return first->second;
    }

    // Each part's blocks, borrowed as one range where the checkpoint stores them
    // back to back (a GGUF file's stacked experts), else copied together.
    template <typename Runtime, Checkpoint Weights>
    static void bind_stacked_blocks(Runtime& rt, const Weights& weights, const Parameter& p) {
        if constexpr (requires { weights.blocks(p.name, *p.format); }) {
            const Dims part(p.shape.begin() + 1, p.shape.end());
            std::vector<StoredBlocks> stored;
            bool adjacent = true;
            for (const std::string& name : p.stacked) {
                check_shape(weights, name, part);
                stored.push_back(weights.blocks(name, *p.format));
                const StoredBlocks& b = stored.back();
                adjacent = adjacent && b.owner && (stored.size() == 1 || (b.owner == stored[stored.size() - 2].owner &&
                           b.bytes.data() == stored[stored.size() - 2].bytes.data() + stored[stored.size() - 2].bytes.size()));
            }
            const std::size_t total = stored.size() * stored[0].bytes.size();
            if constexpr (requires { rt.borrow_bytes(p.tensor, stored[0].bytes, stored[0].owner); }) {
                if (adjacent) return rt.borrow_bytes(p.tensor, std::span(stored[0].bytes.data(), total), stored[0].owner);
            }
            std::vector<std::byte> bytes;
            bytes.reserve(total);
            for (const StoredBlocks& b : stored) bytes.insert(bytes.end(), b.bytes.begin(), b.bytes.end());
            rt.set_bytes(p.tensor, bytes);
        } else {
            throw Error(weights.location(), fmt::format("'{}' is to be kept as {} blocks, but this checkpoint holds no "
                                                        "quantized tensors", p.name, io::name_of(*p.format)));
        }
    }

    GraphTensor push(Graph& cx, std::string name, Dims shape, DType dtype, std::vector<std::string> stacked,
                     std::vector<float> computed) {
        Shape graph_shape(shape.begin(), shape.end());
        GraphTensor tensor = cx.named_tensor(name, graph_shape, dtype);
        parameters_.push_back({std::move(name), tensor, std::move(shape), std::move(stacked), std::move(computed), {}});
        return tensor;
    }

    template <Checkpoint Weights>
    static void check_shape(const Weights& weights, const std::string& name, const Dims& shape) {
        const std::optional<Dims> stored = weights.shape_of(name);
        if (!stored)
            throw Error(weights.location(),
                        fmt::format("missing tensor '{}' (the model expects shape {})", name, shape_string(shape)));
        if (*stored != shape)
            throw Error(weights.location(), fmt::format("tensor '{}' has shape {} but the model expects {}", name,
                                                        shape_string(*stored), shape_string(shape)));
    }

    std::vector<Parameter> parameters_;
    std::map<std::string, QuantFormat, std::less<>> quantized_;
    bool q8_activations_ = true;
    bool narrow_activations_ = false;
};

}  // namespace luminal::nn

#pragma once
// What ParameterSet::bind reads weights from: tensors under their Hugging Face
// names, each with a row-major shape, its stored bytes when they are already in
// the dtype the model wants (bound without a copy), and otherwise its values
// as f32. A safetensors model is one as it is; a GGUF file is one after
// renaming (gguf_checkpoint.hpp), which also gives a quantized matrix's
// blocks as stored (blocks()).
#include "luminal/core/dtype.hpp"
#include "luminal/io/safetensors_convert.hpp"
#include "luminal/io/safetensors_model.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::nn {

using Dims = std::vector<std::int64_t>;

template <typename C>
concept Checkpoint = requires(const C& checkpoint, std::string_view name, DType dtype) {
    { checkpoint.location() } -> std::convertible_to<std::string>;  // for error messages
    { checkpoint.tensor_names() } -> std::same_as<std::vector<std::string>>;
    { checkpoint.shape_of(name) } -> std::same_as<std::optional<Dims>>;  // nullopt: no such tensor
    { checkpoint.bytes_as(name, dtype) } -> std::same_as<std::optional<std::span<const std::byte>>>;
    { checkpoint.values(name) } -> std::same_as<std::vector<float>>;
};

// Stored bytes (a quantized matrix's blocks, or a tensor in the dtype the model
// wants); `owner`, when set, keeps `bytes` valid: a mapped file the runtime may
// read in place.
struct StoredBlocks {
    std::span<const std::byte> bytes;
    std::shared_ptr<const void> owner;
};

// With an `owner` that keeps `model` alive, tensors in the wanted dtype are
// offered in place (mapped()) for a runtime to read without a copy.
class SafetensorsCheckpoint {
public:
    explicit SafetensorsCheckpoint(const io::SafetensorsModel& model, std::shared_ptr<const void> owner = {})
        : model_(model), owner_(std::move(owner)) {}

    std::string location() const { return model_.path().string(); }
    std::vector<std::string> tensor_names() const {
        const auto names = model_.names();
        return {names.begin(), names.end()};
    }
    std::optional<Dims> shape_of(std::string_view name) const {
        if (const io::SafetensorsTensor* tensor = model_.find(name)) return tensor->shape;
        return std::nullopt;
    }
    std::optional<std::span<const std::byte>> bytes_as(std::string_view name, DType dtype) const {
        const io::SafetensorsTensor& tensor = model_.at(name);
        if (tensor.luminal_dtype() == dtype) return tensor.bytes;
        return std::nullopt;
    }
    std::vector<float> values(std::string_view name) const { return io::to_f32(model_.at(name)); }
    // The tensor's bytes in its mapped file, when stored as `dtype` and the mapping outlives the checkpoint.
    std::optional<StoredBlocks> mapped(std::string_view name, DType dtype) const {
        if (!owner_) return std::nullopt;
        if (const auto bytes = bytes_as(name, dtype)) return StoredBlocks{*bytes, owner_};
        return std::nullopt;
    }

private:
    const io::SafetensorsModel& model_;
    std::shared_ptr<const void> owner_;
};

}  // namespace luminal::nn

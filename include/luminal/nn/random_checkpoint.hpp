#pragma once
// Seeded random weights for a built model, as a Checkpoint: every tensor the
// model reads, in the dtype or block format it wants, made on demand. What a
// timing run of a large shape binds (the Llama-3-8B shape on a lent GPU) where
// a 16 GB file could neither travel nor be written in time. The values are the
// same for a seed whatever the thread count: each chunk of a tensor has its own
// stream, keyed by the tensor's name, the chunk's index and the seed.
//
// Matrices are uniform in +-1/sqrt(fan-in) (activations stay O(1) through the
// layers, as a trained model's do); vectors (norm weights, biases) in [0.9, 1.1].
// Quantized blocks have random quants and a scale chosen so no element exceeds
// the matrix's bound, so no run overflows to inf or NaN.
#include "luminal/core/dtype.hpp"
#include "luminal/lowering/quantized.hpp"
#include "luminal/nn/checkpoint.hpp"
#include "luminal/nn/parameters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace luminal::nn {

namespace random_detail {

inline std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// FNV-1a: a stable hash of a tensor's name (std::hash may differ between libraries).
inline std::uint64_t name_hash(std::string_view name) {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    return h;
}

// Runs body(begin, end) over [0, count) in chunks of `chunk`, on up to the machine's threads.
template <typename Body>
void for_each_chunk(std::size_t count, std::size_t chunk, Body body) {
    const std::size_t chunks = (count + chunk - 1) / chunk;
    const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(chunks, 1));
    auto work = [&](std::size_t first) {
        for (std::size_t c = first; c < chunks; c += threads) body(c, c * chunk, std::min(count, (c + 1) * chunk));
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (std::thread& t : pool) t.join();
}

// Where a block format keeps its f16 scale and f16 min (-1: none), and the
// largest |element| a block holds per unit of scale with random quants and a
// zero min (gguf_quants.hpp gives the layouts).
struct BlockScale {
    int scale_offset, min_offset;
    double largest_per_scale;
};
inline BlockScale block_scale(QuantFormat f) {
    switch (f) {
        case QuantFormat::Q8_0: return {0, -1, 128};          // d * q, q in [-128, 127]
        case QuantFormat::Q4_0: return {0, -1, 8};            // d * (q - 8)
        case QuantFormat::Q4_1: return {0, 2, 15};            // d * q + m
        case QuantFormat::Q5_0: return {0, -1, 16};           // d * (q - 16)
        case QuantFormat::Q5_1: return {0, 2, 31};            // d * q + m
        case QuantFormat::Q4_K: return {0, 2, 63.0 * 15};     // d * 6-bit scale * q - dmin * min
        case QuantFormat::Q6_K: return {208, -1, 128.0 * 32}; // d * int8 scale * (q - 32)
        default: break;
    }
    throw Error("RandomCheckpoint", fmt::format("no random blocks for format {}", io::name_of(f)));
}

}  // namespace random_detail

class RandomCheckpoint {
public:
    RandomCheckpoint(const ParameterSet& parameters, std::uint64_t seed) : seed_(seed) {
        for (const Parameter& p : parameters.parameters()) {
            if (!p.computed.empty()) continue;
            if (p.stacked.empty()) shapes_.emplace(p.name, p.shape);
            const Dims part(p.shape.begin() + 1, p.shape.end());
            for (const std::string& name : p.stacked) shapes_.emplace(name, part);
        }
    }

    std::string location() const { return fmt::format("random weights (seed {})", seed_); }
    std::vector<std::string> tensor_names() const {
        std::vector<std::string> names;
        for (const auto& [name, shape] : shapes_) names.push_back(name);
        return names;
    }
    std::optional<Dims> shape_of(std::string_view name) const {
        const auto it = shapes_.find(name);
        if (it == shapes_.end()) return std::nullopt;
        return it->second;
    }

    // The tensor in `dtype` (f32, f16 or bf16); valid until the next call.
    std::optional<std::span<const std::byte>> bytes_as(std::string_view name, DType dtype) const {
        if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) return std::nullopt;
        const Dims& shape = at(name);
        const std::size_t count = elements(shape), width = size_of(dtype);
        last_.resize(count * width);
        fill(name, shape, count, [&](std::size_t i, float value) {
            if (dtype == DType::F32) return std::memcpy(last_.data() + i * 4, &value, 4), void();
            const std::uint16_t bits = dtype == DType::BF16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
            std::memcpy(last_.data() + i * 2, &bits, 2);
        });
        return std::span<const std::byte>(last_);
    }
    std::vector<float> values(std::string_view name) const {
        const Dims& shape = at(name);
        std::vector<float> out(elements(shape));
        fill(name, shape, out.size(), [&](std::size_t i, float value) { out[i] = value; });
        return out;
    }

    // The matrix as blocks of `format` (its rows' last dim whole blocks); valid until the next call.
    StoredBlocks blocks(std::string_view name, QuantFormat format) const {
        using namespace random_detail;
        const Dims& shape = at(name);
        check(shape.size() == 2 && shape[1] % block_elements(format) == 0, "RandomCheckpoint",
              "'{}' of shape {} cannot be {} blocks", name, shape_string(shape), io::name_of(format));
        const BlockScale layout = block_scale(format);
        const auto block_bytes = static_cast<std::size_t>(io::layout_of(format).block_bytes);
        const std::size_t blocks = elements(shape) / static_cast<std::size_t>(block_elements(format));
        last_.resize(blocks * block_bytes);
        const std::uint16_t scale = f32_to_f16_bits(static_cast<float>(bound(shape) / layout.largest_per_scale));
        const std::uint64_t key = name_hash(name) ^ seed_;
        for_each_chunk(blocks, kChunk / block_bytes, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
            std::uint64_t state = key + chunk * 0xD1B54A32D192ED03ull;
            for (std::size_t b = begin; b < end; ++b) {
                std::byte* block = last_.data() + b * block_bytes;
                for (std::size_t at = 0; at < block_bytes; at += 8) {
                    const std::uint64_t bits = splitmix64(state);
                    std::memcpy(block + at, &bits, std::min<std::size_t>(8, block_bytes - at));
                }
                std::memcpy(block + layout.scale_offset, &scale, 2);
                if (layout.min_offset >= 0) std::memset(block + layout.min_offset, 0, 2);
            }
        });
        return {std::span<const std::byte>(last_), {}};
    }

private:
    static constexpr std::size_t kChunk = 1u << 20;  // elements (or bytes of blocks) per random stream

    const Dims& at(std::string_view name) const {
        const auto it = shapes_.find(name);
        check(it != shapes_.end(), "RandomCheckpoint", "the model has no tensor '{}'", name);
        return it->second;
    }
    static std::size_t elements(const Dims& shape) {
        std::size_t n = 1;
        for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
        return n;
    }
    // The largest |value| of a matrix: 1/sqrt(its fan-in, the last dim).
    static double bound(const Dims& shape) { return 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(shape.back(), 1))); }

    template <typename Store>
    void fill(std::string_view name, const Dims& shape, std::size_t count, Store store) const {
        using namespace random_detail;
        const bool vector = shape.size() < 2;
        const double scale = vector ? 0.1 : bound(shape), offset = vector ? 1.0 : 0.0;
        const std::uint64_t key = name_hash(name) ^ seed_;
        for_each_chunk(count, kChunk, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
            std::uint64_t state = key + chunk * 0xD1B54A32D192ED03ull;
            for (std::size_t i = begin; i < end; ++i) {
                const double unit = static_cast<double>(splitmix64(state) >> 11) * 0x1p-53;  // [0, 1)
                store(i, static_cast<float>(offset + scale * (2 * unit - 1)));
            }
        });
    }

    std::uint64_t seed_;
    std::map<std::string, Dims, std::less<>> shapes_;
    mutable std::vector<std::byte> last_;
};

}  // namespace luminal::nn

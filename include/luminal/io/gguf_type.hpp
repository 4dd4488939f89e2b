#pragma once
// The ggml tensor types a GGUF file names by numeric id, and the block layout each
// is stored in: a row of ne[0] elements is ne[0] / block_elements blocks of
// block_bytes bytes. Every id ggml assigns is listed, so a file holding types
// luminal cannot dequantize still opens; ids ggml never assigned or has retired
// (4 and 5, the old Q4_2/Q4_3; 31-33 and 36-38, in-memory repacked layouts that
// are never written to files) are unknown, and a file using them is rejected.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace luminal::io {

enum class GgufType : std::uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct GgufTypeLayout {
    GgufType type;
    std::string_view name;  // as the gguf Python package spells it
    std::uint32_t block_elements;
    std::uint32_t block_bytes;
};

namespace detail {

// The K-quants' super-block holds this many elements.
inline constexpr std::uint32_t gguf_k_block = 256;

inline constexpr std::array<GgufTypeLayout, 34> gguf_type_layouts{{
    {GgufType::F32, "F32", 1, 4},
    {GgufType::F16, "F16", 1, 2},
    {GgufType::Q4_0, "Q4_0", 32, 2 + 16},
    {GgufType::Q4_1, "Q4_1", 32, 2 + 2 + 16},
    {GgufType::Q5_0, "Q5_0", 32, 2 + 4 + 16},
    {GgufType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16},
    {GgufType::Q8_0, "Q8_0", 32, 2 + 32},
    {GgufType::Q8_1, "Q8_1", 32, 4 + 4 + 32},
    {GgufType::Q2_K, "Q2_K", gguf_k_block, 2 + 2 + gguf_k_block / 16 + gguf_k_block / 4},
    {GgufType::Q3_K, "Q3_K", gguf_k_block, 2 + gguf_k_block / 4 + gguf_k_block / 8 + 12},
    {GgufType::Q4_K, "Q4_K", gguf_k_block, 2 + 2 + gguf_k_block / 2 + 12},
    {GgufType::Q5_K, "Q5_K", gguf_k_block, 2 + 2 + gguf_k_block / 2 + gguf_k_block / 8 + 12},
    {GgufType::Q6_K, "Q6_K", gguf_k_block, 2 + gguf_k_block / 2 + gguf_k_block / 4 + gguf_k_block / 16},
    {GgufType::Q8_K, "Q8_K", gguf_k_block, 4 + gguf_k_block + gguf_k_block / 8},
    {GgufType::IQ2_XXS, "IQ2_XXS", gguf_k_block, 2 + gguf_k_block / 4},
    {GgufType::IQ2_XS, "IQ2_XS", gguf_k_block, 2 + gguf_k_block / 4 + gguf_k_block / 32},
    {GgufType::IQ3_XXS, "IQ3_XXS", gguf_k_block, 2 + gguf_k_block / 4 + gguf_k_block / 8},
    {GgufType::IQ1_S, "IQ1_S", gguf_k_block, 2 + gguf_k_block / 8 + gguf_k_block / 16},
    {GgufType::IQ4_NL, "IQ4_NL", 32, 2 + 16},
    {GgufType::IQ3_S, "IQ3_S", gguf_k_block, 2 + gguf_k_block / 4 + gguf_k_block / 8 + gguf_k_block / 32 + 4},
    {GgufType::IQ2_S, "IQ2_S", gguf_k_block, 2 + gguf_k_block / 4 + gguf_k_block / 16},
    {GgufType::IQ4_XS, "IQ4_XS", gguf_k_block, 2 + 2 + gguf_k_block / 2 + gguf_k_block / 64},
    {GgufType::I8, "I8", 1, 1},
    {GgufType::I16, "I16", 1, 2},
    {GgufType::I32, "I32", 1, 4},
    {GgufType::I64, "I64", 1, 8},
    {GgufType::F64, "F64", 1, 8},
    {GgufType::IQ1_M, "IQ1_M", gguf_k_block, gguf_k_block / 8 + gguf_k_block / 16 + gguf_k_block / 32},
    {GgufType::BF16, "BF16", 1, 2},
    {GgufType::TQ1_0, "TQ1_0", gguf_k_block, 2 + 4 * 13},
    {GgufType::TQ2_0, "TQ2_0", gguf_k_block, 2 + 64},
    {GgufType::MXFP4, "MXFP4", 32, 1 + 16},
    {GgufType::NVFP4, "NVFP4", 64, 4 + 32},
    {GgufType::Q1_0, "Q1_0", 128, 2 + 16},
}};

}  // namespace detail

// The layout of a type id, or nullopt for an id ggml does not assign.
constexpr std::optional<GgufTypeLayout> gguf_type_layout(std::uint32_t id) {
    for (const GgufTypeLayout& layout : detail::gguf_type_layouts)
        if (static_cast<std::uint32_t>(layout.type) == id) return layout;
    return std::nullopt;
}

constexpr GgufTypeLayout layout_of(GgufType type) {
    // Every enumerator is in the table, so this always finds one.
    return *gguf_type_layout(static_cast<std::uint32_t>(type));
}

constexpr std::string_view name_of(GgufType type) { return layout_of(type).name; }

}  // namespace luminal::io

#pragma once
// Limits the tokenizer.json loader enforces so that a hostile or corrupt file is
// an Error at load time instead of a stack overflow or an exhausted memory later.
namespace luminal::io::tokenizer {

// Sequence components nest no deeper than this.
inline constexpr int max_nesting = 16;

// The most a chain of normalizers, or of decoders, may multiply text by (see
// Normalizer::growth); real chains stay below 20.
inline constexpr double max_growth = 4096;

}  // namespace luminal::io::tokenizer

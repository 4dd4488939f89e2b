// libFuzzer target: arbitrary bytes -> GgufView, then every metadata value read,
// every tensor dequantized to f32, and the model config and tokenizer built from
// the metadata (the tokenizer then encodes and decodes a fixed string). Only
// luminal::Error may escape.
#include "luminal/io/gguf.hpp"
#include "luminal/io/gguf_model_config.hpp"
#include "luminal/io/gguf_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace {

template <typename F>
void tolerate_errors(F&& f) {
    try {
        f();
    } catch (const luminal::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tolerate_errors([&] {
        const auto view = luminal::io::GgufView::parse(std::span(reinterpret_cast<const std::byte*>(data), size),
                                                       "fuzz.gguf");
        for (const auto& entry : view.metadata().entries()) (void)entry.value.type_name();
        for (const auto& tensor : view.tensors()) {
            (void)tensor.shape();
            if (luminal::io::can_dequantize(tensor.type)) tolerate_errors([&] { (void)luminal::io::dequantize(tensor); });
        }
        tolerate_errors([&] { (void)luminal::io::gguf_model_config(view); });
        tolerate_errors([&] {
            const auto tokenizer = luminal::io::gguf_tokenizer(view);
            const auto ids = tokenizer.encode("Hello 123 <|im_start|>wörld\n");
            (void)tokenizer.decode(ids);
        });
    });
    return 0;
}

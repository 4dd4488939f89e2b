// libFuzzer target: arbitrary bytes -> GgufView, then every metadata value read
// and every tensor dequantized to f32. Only luminal::Error may escape.
#include "luminal/io/gguf.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto view = luminal::io::GgufView::parse(std::span(reinterpret_cast<const std::byte*>(data), size),
                                                       "fuzz.gguf");
        for (const auto& entry : view.metadata().entries()) (void)entry.value.type_name();
        for (const auto& tensor : view.tensors()) {
            (void)tensor.shape();
            if (luminal::io::can_dequantize(tensor.type)) (void)luminal::io::dequantize(tensor);
        }
    } catch (const luminal::Error&) {
    }
    return 0;
}

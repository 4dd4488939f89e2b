// libFuzzer target: arbitrary bytes -> SafetensorsView, then every tensor read
// and converted to f32. Only luminal::Error may escape.
#include "luminal/io/safetensors.hpp"
#include "luminal/io/safetensors_convert.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto view = luminal::io::SafetensorsView::parse(
            std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.safetensors");
        for (const auto& tensor : view.tensors()) {
            try {
                (void)luminal::io::to_f32(tensor);
            } catch (const luminal::Error&) {  // dtypes without an exact f32 form
            }
        }
    } catch (const luminal::Error&) {
    }
    return 0;
}

// libFuzzer target: config.json bytes -> ModelConfig. Only luminal::Error may escape.
#include "luminal/io/model_config.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        luminal::io::parse_model_config(luminal::io::parse_json(text, "config.json"), "config.json");
    } catch (const luminal::Error&) {
    }
    return 0;
}

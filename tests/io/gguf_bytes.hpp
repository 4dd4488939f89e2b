#pragma once
// GGUF files assembled byte by byte in tests, for inputs the Python writer
// cannot produce (malformed files) or that are quicker to state inline.
#include <luminal/io/gguf_value.hpp>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

namespace gguf_test {

using luminal::io::GgufValueType;

// A GGUF file assembled by hand, little-endian field by field.
struct GgufBytes {
    std::string bytes;

    GgufBytes& raw(std::string_view text) {
        bytes += text;
        return *this;
    }
    template <typename T>
    GgufBytes& scalar(T value) {
        char buffer[sizeof(T)];
        std::memcpy(buffer, &value, sizeof(T));
        bytes.append(buffer, sizeof(T));
        return *this;
    }
    GgufBytes& u8(std::uint8_t v) { return scalar(v); }
    GgufBytes& u32(std::uint32_t v) { return scalar(v); }
    GgufBytes& u64(std::uint64_t v) { return scalar(v); }
    GgufBytes& str(std::string_view text) { return u64(text.size()).raw(text); }
    GgufBytes& header(std::uint64_t tensors, std::uint64_t keys, std::uint32_t version = 3) {
        return raw("GGUF").u32(version).u64(tensors).u64(keys);
    }
    GgufBytes& key(std::string_view name, GgufValueType type) { return str(name).u32(static_cast<std::uint32_t>(type)); }
    GgufBytes& tensor_info(std::string_view name, std::initializer_list<std::uint64_t> dims, std::uint32_t type,
                           std::uint64_t offset) {
        str(name).u32(static_cast<std::uint32_t>(dims.size()));
        for (std::uint64_t dim : dims) u64(dim);
        return u32(type).u64(offset);
    }
    GgufBytes& pad_to(std::size_t alignment) {
        bytes.append((alignment - bytes.size() % alignment) % alignment, '\0');
        return *this;
    }
    GgufBytes& f32_data(std::initializer_list<float> values) {
        for (float v : values) scalar(v);
        return *this;
    }
};

}  // namespace gguf_test

#pragma once
// Raw little-endian elements of a dtype as a HostBuffer, and typed values as
// one: how the host-buffer runtimes (the reference, the CUDA emulator) bind inputs.
#include <cstring>
#include <span>
#include <vector>

#include "luminal/core/host_buffer.hpp"

namespace luminal {

namespace host_buffer_detail {
template <typename T>
T load(const std::byte* bytes, std::size_t i) {
    T value;
    std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
    return value;
}
}  // namespace host_buffer_detail

inline HostBuffer host_buffer_from_bytes(DType dtype, const std::byte* p, std::size_t count) {
    using host_buffer_detail::load;
    HostBuffer b(dtype, count);
    for (std::size_t i = 0; i < count; ++i) {
        switch (dtype) {
            case DType::F32: b.store_double(i, load<float>(p, i)); break;
            case DType::F16: b.store_double(i, f16_bits_to_f32(load<std::uint16_t>(p, i))); break;
            case DType::BF16: b.store_double(i, bf16_bits_to_f32(load<std::uint16_t>(p, i))); break;
            case DType::I32: b.store_int(i, load<std::int32_t>(p, i)); break;
            case DType::I64: b.store_int(i, load<std::int64_t>(p, i)); break;
            case DType::U8:
            case DType::Bool: b.store_int(i, load<std::uint8_t>(p, i)); break;
        }
    }
    return b;
}

// The buffer as raw little-endian elements of its dtype.
inline std::vector<std::byte> host_buffer_to_bytes(const HostBuffer& b) {
    std::vector<std::byte> out(b.size() * size_of(b.dtype));
    auto put = [&]<typename T>(std::size_t i, T v) { std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T)); };
    for (std::size_t i = 0; i < b.size(); ++i) {
        switch (b.dtype) {
            case DType::F32: put(i, static_cast<float>(b.floats[i])); break;
            case DType::F16: put(i, f32_to_f16_bits(static_cast<float>(b.floats[i]))); break;
            case DType::BF16: put(i, f32_to_bf16_bits(static_cast<float>(b.floats[i]))); break;
            case DType::I32: put(i, static_cast<std::int32_t>(b.ints[i])); break;
            case DType::I64: put(i, b.ints[i]); break;
            case DType::U8:
            case DType::Bool: put(i, static_cast<std::uint8_t>(b.ints[i])); break;
        }
    }
    return out;
}

template <typename T>
HostBuffer host_buffer_from_values(DType dtype, std::span<const T> values) {
    HostBuffer b(dtype, values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_floating_point_v<T>) b.store_double(i, static_cast<double>(values[i]));
        else b.store_int(i, static_cast<std::int64_t>(values[i]));
    }
    return b;
}

// A buffer's values as T (floats converted, integers as stored).
template <typename T>
std::vector<T> host_buffer_values(const HostBuffer& b) {
    std::vector<T> out(b.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_floating_point_v<T>) out[i] = static_cast<T>(b.as_double(i));
        else out[i] = static_cast<T>(b.as_int(i));
    }
    return out;
}

}  // namespace luminal

#pragma once
// How a user's op runs on the CpuRuntime: its type has
//     void cpu(const CpuOpCall& call) const;
// and the runtime is told about it with CpuRuntime::add_op<T>(). The kernel
// reads every input as a contiguous row-major array in its dtype's storage
// (f32 as float, f16/bf16 as 16-bit patterns, integers in their width; the
// runtime copies a strided or padded view into that form first) and writes
// the output the same way.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "luminal/core/dtype.hpp"
#include "luminal/core/error.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal {

struct CpuTensor {
    DType dtype;
    std::vector<std::int64_t> dims;
    std::byte* data;
    std::int64_t numel() const {
        std::int64_t n = 1;
        for (std::int64_t d : dims) n *= d;
        return n;
    }
    // The elements as their storage type, checked against the dtype's size.
    template <typename T>
    T* as() const {
        check(sizeof(T) == size_of(dtype), "CpuTensor::as", "a {} tensor holds {}-byte elements, not {}", name_of(dtype),
              size_of(dtype), sizeof(T));
        return reinterpret_cast<T*>(data);
    }
};

struct CpuOpCall {
    std::span<const CpuTensor> inputs;
    const CpuTensor& out;
    const DynMap& dims;
};

template <typename T>
concept CpuOp = requires(const T& op, const CpuOpCall& call) { op.cpu(call); };

}  // namespace luminal

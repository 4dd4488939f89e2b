#pragma once
// A generated kernel with its own thread layout, beyond the kernel IR's three
// frames (elementwise, reduction, row): the decode GEMV, flash-decoding
// attention, the device argmax, a cache write at computed positions. Each
// prints its CUDA source, says how it launches at given dims, what it moves
// (for the cost model and the plan report) and computes its result on the
// host the way its source does (for the host emulator), so it is checked on
// the host twice: by that semantics and by running its printed source.
//
// Kernel arguments: out, the inputs in order, the scratch buffer when it asks
// for one, then dims, fault and the node number, as every generated kernel.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "luminal/cuda/kernel_interpreter.hpp"
#include "luminal/cuda/kernel_work.hpp"

namespace luminal::cuda {

struct KernelGeometry {
    unsigned grid = 0, block = 256;
    std::size_t shared_bytes = 0;  // dynamic shared memory per block
    std::int64_t units = 0;        // pieces of work the grid shares out (0: one per block)
};

class CustomKernel {
public:
    virtual ~CustomKernel() = default;
    virtual std::string source() const = 0;
    virtual std::string_view entry() const = 0;
    virtual KernelGeometry geometry(const DynMap& dims, int multiprocessors) const = 0;
    virtual LaunchWork work(const DynMap& dims, std::span<const SourceInfo> sources, const KernelGeometry& geometry,
                            const DeviceSpec& device) const = 0;
    // Computes the output as the printed source does (values rounded where it rounds them).
    virtual void interpret(const KernelBuffers& buffers) const = 0;
    // Bytes of device memory the kernel keeps between executions (zeroed once,
    // left zeroed by every execution), at `dims`; 0 for none.
    virtual std::size_t scratch_bytes(const DynMap&) const { return 0; }
    // Whether the output is input 0's buffer, updated in place (a cache write).
    virtual bool writes_into_input() const { return false; }
};

}  // namespace luminal::cuda

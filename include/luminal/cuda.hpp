#pragma once
// The CUDA backend: CudaRuntime (needs a GPU and its driver at run time; built
// without CUDA headers), its rules and kernel generator, and HostEmulator,
// which runs the same kernels' IR on the host.
#include "luminal/cuda/cuda_runtime.hpp"
#include "luminal/cuda/host_emulator.hpp"

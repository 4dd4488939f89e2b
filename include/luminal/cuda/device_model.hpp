#pragma once
// The numbers the extractor prices CUDA programs with: an H200 (4.8 TB/s HBM,
// of which a streaming kernel reaches ~4 TB/s; ~4 us per kernel launch
// outside a CUDA graph; 60 TFLOP/s of f32 FMA). The device runtime and its
// host emulator share them, so both extract the same program for a graph.
#include "luminal/egraph/cost_model.hpp"

namespace luminal::cuda {

inline CostModel device_cost_model() { return {4.0e12, 4e-6, 6.0e13}; }

}  // namespace luminal::cuda

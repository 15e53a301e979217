#pragma once
// The CUDA backend: the same ops as the CPU reference on the current GPU (src/kernels/cuda).
// In a build without CUDA this throws hw::Error saying so.
#include "headwise/kernels/backend.hpp"

namespace hw {

// The process's CUDA backend for its current GPU (created on first use, owns its stream,
// cuBLASLt handle and reduction scratch).
const Backend<float>& cuda_backend();

}  // namespace hw

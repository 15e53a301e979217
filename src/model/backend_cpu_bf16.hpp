#pragma once
// The CPU reference of the mixed-precision step (ComputeOps<bf16, float>): every op widens its
// bf16 operands to fp32, runs the fp32 CPU reference op, and rounds each bf16 output once to
// nearest even. That is the contract the CUDA bf16 ops implement, so this object defines what
// train.precision = "bf16" computes; it is slow (every call converts whole tensors) and meant
// for tests and small CPU runs.
#include "headwise/kernels/compute_ops.hpp"
#include "headwise/core/bf16.hpp"

namespace hw {

// A process-wide object (its conversion buffers grow to the largest tensor seen, on the first
// step of a shape, and are reused after).
const ComputeOps<bf16, float>& cpu_bf16_ops();

}  // namespace hw

#pragma once
// The scalars of one AdamW update, shared by the CPU reference and the CUDA kernel so both run
// the same float formula: p *= decay; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). optim/adamw.cpp derives them from lr, t and
// the config.
namespace hw {

struct AdamWStep {
  float decay = 1.0f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, bc2_sqrt = 1.0f, step_size = 0.0f;
};

}  // namespace hw

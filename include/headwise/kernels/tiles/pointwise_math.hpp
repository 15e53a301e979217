#pragma once
// The per-element math of the CUDA GELU and AdamW kernels, written with the CPU reference's
// float formulas (kernels/cpu/gelu.cpp, kernels/cpu/adamw.cpp) so both backends compute the
// same expression; host+device so the CPU tests check it against independent references.
#include <cmath>

#include "headwise/kernels/adamw_step.hpp"
#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr float kGeluSqrt2OverPi = 0.797884560802865355879892119868763737f;
constexpr float kGeluCubic = 0.044715f;

// GELU, tanh approximation, through 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) (no cancellation
// for large negative x). exp overflowing to inf gives -0, the correct limit.
HW_HOST_DEVICE float gelu_value(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

// d gelu / dx = s + 2 x s (1 - s) du/dx with s = sigmoid(2u).
HW_HOST_DEVICE float gelu_slope(float x) {
  const float x2 = x * x;
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x2 * x);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2);
  const float s = 1.0f / (1.0f + expf(-2.0f * u));
  return s + 2.0f * x * s * (1.0f - s) * du;
}

// One AdamW element (formula in kernels/adamw_step.hpp), in the CPU reference's order.
HW_HOST_DEVICE void adamw_element(float& p, float g, float& m, float& v, const AdamWStep& s) {
  p *= s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  p -= s.step_size * (m / denom);
}

}  // namespace hw::tiles

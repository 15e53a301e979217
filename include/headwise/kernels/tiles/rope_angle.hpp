#pragma once
// Rotary embedding geometry for the CUDA rope kernel, in the CPU reference's conventions
// (kernels/cpu/rope.cpp): rotate-half pairs (i, i + hd/2) of each head, angle
// t * theta^(-2i/hd) evaluated in double and rounded to float cos/sin.
#include <cmath>
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// cos and direction * sin of pair i's angle at position t (direction -1: inverse rotation).
HW_HOST_DEVICE void rope_cos_sin(int64_t t, int64_t i, int64_t hd, double theta, double direction, float& c,
                                 float& s) {
  const double inv_freq = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
  const double angle = static_cast<double>(t) * inv_freq;
  c = static_cast<float>(cos(angle));
  s = static_cast<float>(direction * sin(angle));
}

// Offset of the first element of pair i of head h in row bt (rows of row_stride elements, the
// rotated heads start at column col0); its partner is hd/2 further.
HW_HOST_DEVICE int64_t rope_pair_offset(int64_t bt, int64_t h, int64_t i, int64_t row_stride, int64_t col0,
                                        int64_t hd) {
  return bt * row_stride + col0 + h * hd + i;
}

}  // namespace hw::tiles

#pragma once
// Running softmax statistics of one logits row, for the CUDA cross-entropy: each thread pushes
// its logits, then threads merge their statistics in a fixed tree. The sum is kept in double
// of float exponentials, as the CPU reference adds its float exp(x - max) in double.
#include <cmath>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// sum = sum over pushed x of exp(x - max). Empty: max = -inf, sum = 0.
struct SoftmaxStat {
  float max;
  double sum;
};

HW_HOST_DEVICE SoftmaxStat softmax_stat_empty() { return {-INFINITY, 0.0}; }

// A new maximum rescales the sum (in double: exact enough that the order of pushes barely
// matters). A -inf logit (masked) adds nothing; it is skipped explicitly because
// exp(-inf - (-inf)) would be NaN while the row's maximum is still -inf. NaN logits make the
// sum NaN, so the loss is NaN as on the CPU.
HW_HOST_DEVICE void softmax_stat_push(SoftmaxStat& s, float x) {
  if (x > s.max) {
    s.sum = s.sum * exp(static_cast<double>(s.max) - static_cast<double>(x)) + 1.0;
    s.max = x;
  } else if (x != -INFINITY) {
    s.sum += static_cast<double>(expf(x - s.max));
  }
}

// Combine two partial statistics (commutative up to rounding; callers merge in a fixed order).
// An empty side (sum 0) contributes nothing, which also avoids -inf - -inf.
HW_HOST_DEVICE SoftmaxStat softmax_stat_merge(SoftmaxStat a, SoftmaxStat b) {
  if (b.max > a.max) {
    const SoftmaxStat t = a;
    a = b;
    b = t;
  }
  if (b.sum != 0.0) a.sum += b.sum * exp(static_cast<double>(b.max) - static_cast<double>(a.max));
  return a;
}

}  // namespace hw::tiles

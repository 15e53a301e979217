// Rotary position embedding, rotate-half convention: within each head of width hd, the pair
// (x[i], x[i + hd/2]) rotates by angle t * theta^(-2i/hd). Angles and their cos/sin are
// computed in double; they depend only on (t, i), so each is computed once per call and
// reused for every sequence and head.
#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

namespace {

// direction +1 rotates (forward); -1 applies the inverse (transpose) rotation (backward).
template <class F>
void rope_rotate(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                 double theta, double direction) {
  hw::check(hd > 0 && hd % 2 == 0, "rope: head width hd=" + std::to_string(hd) + " must be positive and even");
  hw::check(theta > 0.0, "rope: theta=" + std::to_string(theta) + " must be positive");
  const int64_t half = hd / 2;
  // cos/sin for a block of pair indices live on the stack (no heap scratch for any hd).
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (detail::worth_parallel(B * T * n_heads * hd))
  for (int64_t t = 0; t < T; t++) {
    for (int64_t i0 = 0; i0 < half; i0 += kBlock) {
      const int64_t w = std::min(kBlock, half - i0);
      F c[kBlock], s[kBlock];
      for (int64_t j = 0; j < w; j++) {
        const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i0 + j) / static_cast<double>(hd));
        const double angle = static_cast<double>(t) * inv_freq;
        c[j] = static_cast<F>(std::cos(angle));
        s[j] = static_cast<F>(direction * std::sin(angle));
      }
      for (int64_t b = 0; b < B; b++) {
        F* row = x + (b * T + t) * row_stride + col0;
        for (int64_t h = 0; h < n_heads; h++) {
          F* lo = row + h * hd + i0;
          F* hi = lo + half;
#pragma omp simd
          for (int64_t j = 0; j < w; j++) {
            const F x1 = lo[j], x2 = hi[j];
            lo[j] = x1 * c[j] - x2 * s[j];
            hi[j] = x2 * c[j] + x1 * s[j];
          }
        }
      }
    }
  }
}

}  // namespace

template <class F>
void rope_forward(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                  double theta) {
  rope_rotate(x, B, T, row_stride, col0, n_heads, hd, theta, 1.0);
}

// The rotation is orthogonal, so its transpose (the gradient map) is the rotation by -angle.
template <class F>
void rope_backward(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                   double theta) {
  rope_rotate(dx, B, T, row_stride, col0, n_heads, hd, theta, -1.0);
}

template void rope_forward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_forward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);

}  // namespace hw::cpu

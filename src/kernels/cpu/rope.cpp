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
// inv_freq(i) is pair i's frequency; row t of a sequence sits at position pos0 + t.
template <class F, class Freq>
void rope_rotate(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                 const Freq& inv_freq_of, int64_t pos0, double direction) {
  // (The message is built only on failure: a decode step allocates nothing.)
  if (hd <= 0 || hd % 2 != 0) hw::fail("rope: head width hd=" + std::to_string(hd) + " must be positive and even");
  const int64_t half = hd / 2;
  // cos/sin for a block of pair indices live on the stack (no heap scratch for any hd).
  constexpr int64_t kBlock = 64;
  detail::parallel_for(T, detail::worth_parallel(B * T * n_heads * hd), [&](int64_t t) {
    for (int64_t i0 = 0; i0 < half; i0 += kBlock) {
      const int64_t w = std::min(kBlock, half - i0);
      F c[kBlock], s[kBlock];
      for (int64_t j = 0; j < w; j++) {
        const double angle = static_cast<double>(pos0 + t) * inv_freq_of(i0 + j);
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
  });
}

// theta^(-2i/hd): the unscaled frequencies.
struct ThetaFreq {
  double theta, hd;
  double operator()(int64_t i) const { return std::pow(theta, -2.0 * static_cast<double>(i) / hd); }
};
struct TableFreq {
  const double* inv_freq;
  double operator()(int64_t i) const { return inv_freq[i]; }
};

ThetaFreq theta_freq(double theta, int64_t hd) {
  if (!(theta > 0.0)) hw::fail("rope: theta=" + std::to_string(theta) + " must be positive");
  return {theta, static_cast<double>(hd)};
}

}  // namespace

template <class F>
void rope_forward(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                  double theta) {
  rope_rotate(x, B, T, row_stride, col0, n_heads, hd, theta_freq(theta, hd), 0, 1.0);
}

// The rotation is orthogonal, so its transpose (the gradient map) is the rotation by -angle.
template <class F>
void rope_backward(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                   double theta) {
  rope_rotate(dx, B, T, row_stride, col0, n_heads, hd, theta_freq(theta, hd), 0, -1.0);
}

template <class F>
void rope_forward_freqs(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                        const double* inv_freq, int64_t pos0) {
  rope_rotate(x, B, T, row_stride, col0, n_heads, hd, TableFreq{inv_freq}, pos0, 1.0);
}

template <class F>
void rope_backward_freqs(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                         const double* inv_freq, int64_t pos0) {
  rope_rotate(dx, B, T, row_stride, col0, n_heads, hd, TableFreq{inv_freq}, pos0, -1.0);
}

template void rope_forward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_forward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double);
#define HW_INSTANTIATE(F)                                                                                         \
  template void rope_forward_freqs<F>(F*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const double*,   \
                                      int64_t);                                                                  \
  template void rope_backward_freqs<F>(F*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const double*,  \
                                       int64_t);
HW_INSTANTIATE(float)
HW_INSTANTIATE(double)
#undef HW_INSTANTIATE

}  // namespace hw::cpu

// RMSNorm (Llama, Qwen): y = weight * x / sqrt(mean(x^2) + eps), no mean subtraction, no bias.
// One kernel serves the residual stream (heads = 1, hd = C) and Qwen3's per-head q/k norm (each
// hd-wide head of a row normalised on its own, one weight vector shared by the heads). Sums of
// squares are accumulated in double, like LayerNorm's statistics.
#include <algorithm>
#include <cmath>

#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

template <class F>
void rmsnorm_forward(F* out, int64_t out_stride, F* rstd, const F* inp, int64_t in_stride, const F* weight, int64_t N,
                     int64_t heads, int64_t hd, double eps) {
  detail::parallel_for(N, detail::worth_parallel(N * heads * hd), [&](int64_t n) {
    for (int64_t h = 0; h < heads; h++) {
      const F* x = inp + n * in_stride + h * hd;
      double sq = 0.0;
#pragma omp simd reduction(+ : sq)
      for (int64_t i = 0; i < hd; i++) sq += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      const F rs = static_cast<F>(1.0 / std::sqrt(sq / static_cast<double>(hd) + eps));
      F* y = out + n * out_stride + h * hd;
#pragma omp simd
      for (int64_t i = 0; i < hd; i++) y[i] = weight[i] * (x[i] * rs);
      if (rstd) rstd[n * heads + h] = rs;
    }
  });
}

// With g = dout * weight and xhat = x * rstd: dx = rstd * (g - xhat * mean(g * xhat)).
// dweight[i] += sum over rows and heads of dout[i] * xhat[i].
template <class F>
void rmsnorm_backward(F* dinp, int64_t din_stride, F* dweight, const F* dout, int64_t dout_stride, const F* inp,
                      int64_t in_stride, const F* weight, const F* rstd, int64_t N, int64_t heads, int64_t hd,
                      bool accumulate) {
  // The weight gradient first: dinp may alias dout (accumulate = false, in place).
  if (dweight) {
    constexpr int64_t kBlock = 64;
    const int64_t nblocks = (hd + kBlock - 1) / kBlock;
    detail::parallel_for(nblocks, detail::worth_parallel(N * heads * hd), [&](int64_t blk) {
      const int64_t c0 = blk * kBlock;
      const int64_t w = std::min(kBlock, hd - c0);
      double acc[kBlock] = {};
      for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < heads; h++) {
          const F* x = inp + n * in_stride + h * hd + c0;
          const F* dy = dout + n * dout_stride + h * hd + c0;
          const F rs = rstd[n * heads + h];
#pragma omp simd
          for (int64_t j = 0; j < w; j++) acc[j] += static_cast<double>(dy[j] * (x[j] * rs));
        }
      for (int64_t j = 0; j < w; j++) dweight[c0 + j] += static_cast<F>(acc[j]);
    });
  }
  if (!dinp) return;
  detail::parallel_for(N, detail::worth_parallel(N * heads * hd), [&](int64_t n) {
    for (int64_t h = 0; h < heads; h++) {
      const F* x = inp + n * in_stride + h * hd;
      const F* dy = dout + n * dout_stride + h * hd;
      const F rs = rstd[n * heads + h];
      double gx = 0.0;
#pragma omp simd reduction(+ : gx)
      for (int64_t i = 0; i < hd; i++) gx += static_cast<double>(dy[i] * weight[i] * (x[i] * rs));
      const F gx_mean = static_cast<F>(gx / static_cast<double>(hd));
      F* dx = dinp + n * din_stride + h * hd;
      if (accumulate) {
#pragma omp simd
        for (int64_t i = 0; i < hd; i++) dx[i] += (dy[i] * weight[i] - x[i] * rs * gx_mean) * rs;
      } else {  // element i of dy is read before dx[i] is written: in place is fine
#pragma omp simd
        for (int64_t i = 0; i < hd; i++) dx[i] = (dy[i] * weight[i] - x[i] * rs * gx_mean) * rs;
      }
    }
  });
}

#define HW_INSTANTIATE(F)                                                                                        \
  template void rmsnorm_forward<F>(F*, int64_t, F*, const F*, int64_t, const F*, int64_t, int64_t, int64_t,     \
                                   double);                                                                     \
  template void rmsnorm_backward<F>(F*, int64_t, F*, const F*, int64_t, const F*, int64_t, const F*, const F*, \
                                    int64_t, int64_t, int64_t, bool);
HW_INSTANTIATE(float)
HW_INSTANTIATE(double)
#undef HW_INSTANTIATE

}  // namespace hw::cpu

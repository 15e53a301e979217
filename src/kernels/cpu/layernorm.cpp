// LayerNorm over the last dimension with a biased variance (as PyTorch). Row statistics
// are accumulated in double: it costs nothing next to the memory traffic and keeps the
// float path within float rounding of the double reference.
#include <algorithm>
#include <cmath>

#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

template <class F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int64_t N, int64_t C,
                       double eps) {
  detail::parallel_for(N, detail::worth_parallel(N * C), [&](int64_t n) {
    const F* x = inp + n * C;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < C; i++) sum += static_cast<double>(x[i]);
    const double m = sum / static_cast<double>(C);
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < C; i++) {
      const double d = static_cast<double>(x[i]) - m;
      sq += d * d;
    }
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(C) + eps);
    const F mf = static_cast<F>(m), rf = static_cast<F>(rs);
    F* y = out + n * C;
#pragma omp simd
    for (int64_t i = 0; i < C; i++) y[i] = (x[i] - mf) * rf * weight[i] + bias[i];
    if (mean) mean[n] = mf;
    if (rstd) rstd[n] = rf;
  });
}

template <class F>
void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, const F* mean,
                        const F* rstd, int64_t N, int64_t C) {
  if (dinp) {
    // dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * weight.
    detail::parallel_for(N, detail::worth_parallel(N * C), [&](int64_t n) {
      const F* x = inp + n * C;
      const F* dy = dout + n * C;
      const F m = mean[n], rs = rstd[n];
      double g_sum = 0.0, gx_sum = 0.0;
#pragma omp simd reduction(+ : g_sum, gx_sum)
      for (int64_t i = 0; i < C; i++) {
        const F g = dy[i] * weight[i];
        g_sum += static_cast<double>(g);
        gx_sum += static_cast<double>(g * ((x[i] - m) * rs));
      }
      const F g_mean = static_cast<F>(g_sum / static_cast<double>(C));
      const F gx_mean = static_cast<F>(gx_sum / static_cast<double>(C));
      F* dx = dinp + n * C;
#pragma omp simd
      for (int64_t i = 0; i < C; i++) {
        const F xhat = (x[i] - m) * rs;
        dx[i] += (dy[i] * weight[i] - g_mean - xhat * gx_mean) * rs;
      }
    });
  }
  if (!dweight && !dbias) return;
  // Parameter gradients reduce over rows: columns are split into blocks, each block sums all
  // rows in order, so the result is independent of the thread count and race-free.
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  detail::parallel_for(nblocks, detail::worth_parallel(N * C), [&](int64_t blk) {
    const int64_t c0 = blk * kBlock;
    const int64_t w = std::min(kBlock, C - c0);
    double dw_acc[kBlock] = {};
    double db_acc[kBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const F* x = inp + n * C + c0;
      const F* dy = dout + n * C + c0;
      const F m = mean[n], rs = rstd[n];
#pragma omp simd
      for (int64_t j = 0; j < w; j++) {
        dw_acc[j] += static_cast<double>(dy[j] * ((x[j] - m) * rs));
        db_acc[j] += static_cast<double>(dy[j]);
      }
    }
    if (dweight)
      for (int64_t j = 0; j < w; j++) dweight[c0 + j] += static_cast<F>(dw_acc[j]);
    if (dbias)
      for (int64_t j = 0; j < w; j++) dbias[c0 + j] += static_cast<F>(db_acc[j]);
  });
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                       int64_t, double);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                        int64_t, int64_t, double);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int64_t, int64_t);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, int64_t, int64_t);

}  // namespace hw::cpu

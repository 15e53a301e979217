// Elementwise helpers: residual add, gradient accumulation, and the norm/scale pair used by
// gradient clipping.
#include <algorithm>

#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vec_math.hpp"

namespace hw::cpu {

template <class F>
void residual_forward(F* out, const F* a, const F* b, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) { out[i] = a[i] + b[i]; });
}

// Zeroing is memory-bound: one thread rarely fills a core's share of bandwidth (gradients and
// activation gradients are zeroed several times per update).
template <class F>
void fill_zero(F* x, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) { x[i] = F(0); });
}

template <class F>
void accumulate(F* dst, const F* src, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) { dst[i] += src[i]; });
}

// Fixed-size chunks, summed in parallel a group at a time and combined in index order: the
// result depends on neither the thread count nor the schedule, and needs no heap scratch.
template <class F>
double sum_squares(const F* x, int64_t n) {
  constexpr int64_t kChunk = 1 << 14;
  constexpr int64_t kGroup = 64;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  double total = 0.0;
  for (int64_t g0 = 0; g0 < nchunks; g0 += kGroup) {
    const int64_t ng = std::min(kGroup, nchunks - g0);
    double part[kGroup];
#pragma omp parallel for schedule(static) if (ng > 1)
    for (int64_t c = 0; c < ng; c++) {
      const int64_t i0 = (g0 + c) * kChunk;
      const int64_t i1 = std::min(n, i0 + kChunk);
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = i0; i < i1; i++) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      part[c] = s;
    }
    for (int64_t c = 0; c < ng; c++) total += part[c];
  }
  return total;
}

template <class F>
void scale(F* x, F s, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) { x[i] *= s; });
}

double softmax_numerators_f64(double* x, int64_t n) {
  if (n <= 0) return 0.0;
  double mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; j++) sum += (x[j] = detail::vexp_f64(x[j] - mx));
  return sum;
}

template void residual_forward<float>(float*, const float*, const float*, int64_t);
template void residual_forward<double>(double*, const double*, const double*, int64_t);
template void accumulate<float>(float*, const float*, int64_t);
template void accumulate<double>(double*, const double*, int64_t);
template double sum_squares<float>(const float*, int64_t);
template double sum_squares<double>(const double*, int64_t);
template void fill_zero<float>(float*, int64_t);
template void fill_zero<double>(double*, int64_t);
template void scale<float>(float*, float, int64_t);
template void scale<double>(double*, double, int64_t);

}  // namespace hw::cpu

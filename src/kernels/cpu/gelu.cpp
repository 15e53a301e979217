// GELU, tanh approximation (GPT-2's "gelu_new"): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Written through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): it
// needs only exp, which vexp makes vectorizable for float, and it has no cancellation
// where tanh(u) is close to -1 (large negative x).
#include <algorithm>

#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vec_math.hpp"

namespace hw::cpu {

namespace {
template <class F>
constexpr F kSqrt2OverPi = static_cast<F>(0.797884560802865355879892119868763737);  // sqrt(2/pi)
template <class F>
constexpr F kCubic = static_cast<F>(0.044715);
}  // namespace

template <class F>
void gelu_forward(F* out, const F* inp, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) {
    const F x = inp[i];
    const F u = kSqrt2OverPi<F> * (x + kCubic<F> * x * x * x);
    out[i] = x / (F(1) + detail::vexp(F(-2) * u));
  });
}

// d/dx [x s] with s = sigmoid(2u): s + x * 2 s (1 - s) * du/dx, since 1 - tanh(u)^2 = 4 s (1 - s).
template <class F>
void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t n) {
  detail::parallel_for_simd(n, detail::worth_parallel(n), [&](int64_t i) {
    const F x = inp[i];
    const F x2 = x * x;
    const F u = kSqrt2OverPi<F> * (x + kCubic<F> * x2 * x);
    const F du = kSqrt2OverPi<F> * (F(1) + F(3) * kCubic<F> * x2);
    const F s = F(1) / (F(1) + detail::vexp(F(-2) * u));
    dinp[i] += dout[i] * (s + F(2) * x * s * (F(1) - s) * du);
  });
}

// Column blocks as in matmul's bias_grad (each column's rows summed in order in double, so
// dbias is bit for bit the unfused one); each block's rows are done while they are in cache.
template <class F>
void gelu_backward_bias(F* dinp, F* dbias, const F* inp, const F* dout, int64_t N, int64_t O) {
  const int64_t block = detail::column_block_width(O);
  const int64_t nblocks = (O + block - 1) / block;
  detail::parallel_for(nblocks, detail::worth_parallel(N * O), [&](int64_t blk) {
    const int64_t o0 = blk * block;
    const int64_t w = std::min(block, O - o0);
    double acc[detail::kMaxColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const F* x_row = inp + n * O + o0;
      const F* g_row = dout + n * O + o0;
      F* d_row = dinp + n * O + o0;
#pragma omp simd
      for (int64_t j = 0; j < w; j++) {
        const F x = x_row[j];
        const F x2 = x * x;
        const F u = kSqrt2OverPi<F> * (x + kCubic<F> * x2 * x);
        const F du = kSqrt2OverPi<F> * (F(1) + F(3) * kCubic<F> * x2);
        const F s = F(1) / (F(1) + detail::vexp(F(-2) * u));
        // F(0) + : the same rounding as gelu_backward's += into a zeroed buffer.
        const F d = F(0) + g_row[j] * (s + F(2) * x * s * (F(1) - s) * du);
        d_row[j] = d;
        acc[j] += static_cast<double>(d);
      }
    }
    if (dbias)
      for (int64_t j = 0; j < w; j++) dbias[o0 + j] += static_cast<F>(acc[j]);
  });
}

template void gelu_forward<float>(float*, const float*, int64_t);
template void gelu_forward<double>(double*, const double*, int64_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t);
template void gelu_backward<double>(double*, const double*, const double*, int64_t);
template void gelu_backward_bias<float>(float*, float*, const float*, const float*, int64_t, int64_t);
template void gelu_backward_bias<double>(double*, double*, const double*, const double*, int64_t, int64_t);

}  // namespace hw::cpu

// SwiGLU (Llama's MLP activation): out = silu(gate) * up, silu(x) = x * sigmoid(x). The input row
// holds the fused gate_proj | up_proj outputs: gate in columns [0, I), up in [I, 2I).
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vec_math.hpp"

namespace hw::cpu {

template <class F>
void swiglu_forward(F* out, const F* inp, int64_t N, int64_t I) {
  detail::parallel_for(N, detail::worth_parallel(N * I), [&](int64_t n) {
    const F* g = inp + n * 2 * I;
    const F* u = g + I;
    F* y = out + n * I;
#pragma omp simd
    for (int64_t i = 0; i < I; i++) y[i] = g[i] / (F(1) + detail::vexp(-g[i])) * u[i];
  });
}

// d gate = dout * up * s (1 + g (1 - s)), d up = dout * g s, s = sigmoid(g). Overwrites dinp.
template <class F>
void swiglu_backward(F* dinp, const F* inp, const F* dout, int64_t N, int64_t I) {
  detail::parallel_for(N, detail::worth_parallel(N * I), [&](int64_t n) {
    const F* g = inp + n * 2 * I;
    const F* u = g + I;
    const F* dy = dout + n * I;
    F* dg = dinp + n * 2 * I;
    F* du = dg + I;
#pragma omp simd
    for (int64_t i = 0; i < I; i++) {
      const F s = F(1) / (F(1) + detail::vexp(-g[i]));
      dg[i] = dy[i] * u[i] * s * (F(1) + g[i] * (F(1) - s));
      du[i] = dy[i] * g[i] * s;
    }
  });
}

template void swiglu_forward<float>(float*, const float*, int64_t, int64_t);
template void swiglu_forward<double>(double*, const double*, int64_t, int64_t);
template void swiglu_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace hw::cpu

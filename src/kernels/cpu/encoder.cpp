// Token (+ learned position) embeddings. Token ids are not range-checked here: the op has no
// vocabulary size; callers validate tokens where they are loaded.
#include <algorithm>

#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

template <class F>
void encoder_forward(F* out, const int32_t* tokens, const F* wte, const F* wpe, int64_t B, int64_t T, int64_t C) {
  detail::parallel_for(B * T, detail::worth_parallel(B * T * C), [&](int64_t bt) {
    const F* e = wte + static_cast<int64_t>(tokens[bt]) * C;
    F* y = out + bt * C;
    if (wpe) {
      const F* p = wpe + (bt % T) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = e[c] + p[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = e[c];
    }
  });
}

template <class F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  if (dwte) {
    // Repeated tokens make a scatter over rows race; instead each thread owns a block of
    // channels and walks all positions in order, so every sum has a fixed order.
    constexpr int64_t kBlock = 64;
    const int64_t nblocks = (C + kBlock - 1) / kBlock;
    detail::parallel_for(nblocks, detail::worth_parallel(B * T * C), [&](int64_t blk) {
      const int64_t c0 = blk * kBlock;
      const int64_t w = std::min(kBlock, C - c0);
      for (int64_t bt = 0; bt < B * T; bt++) {
        F* g = dwte + static_cast<int64_t>(tokens[bt]) * C + c0;
        const F* d = dout + bt * C + c0;
#pragma omp simd
        for (int64_t j = 0; j < w; j++) g[j] += d[j];
      }
    });
  }
  if (dwpe) {
    detail::parallel_for(T, detail::worth_parallel(B * T * C), [&](int64_t t) {
      F* g = dwpe + t * C;
      for (int64_t b = 0; b < B; b++) {
        const F* d = dout + (b * T + t) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) g[c] += d[c];
      }
    });
  }
}

template void encoder_forward<float>(float*, const int32_t*, const float*, const float*, int64_t, int64_t, int64_t);
template void encoder_forward<double>(double*, const int32_t*, const double*, const double*, int64_t, int64_t,
                                      int64_t);
template void encoder_backward<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, int64_t);
template void encoder_backward<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t, int64_t);

}  // namespace hw::cpu

// AdamW's element update on the CPU. The optimizer (optim/adamw.cpp) runs every tensor and
// every ZeRO-1 shard through this one loop, so a shard's results are bit-identical to the
// full optimizer's.
#include <cmath>

#include "headwise/kernels/cpu.hpp"

namespace hw::cpu {

template <class F>
void adamw_update(F* p, const F* g, F* m, F* v, int64_t n, const AdamWStep& s) {
  const F decay = F(s.decay), b1 = F(s.beta1), b2 = F(s.beta2), eps = F(s.eps), bc2_sqrt = F(s.bc2_sqrt),
          step_size = F(s.step_size);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = b1 * m[i] + (F(1) - b1) * g[i];
    v[i] = b2 * v[i] + (F(1) - b2) * g[i] * g[i];
    const F denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] -= step_size * (m[i] / denom);
  }
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWStep&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWStep&);

}  // namespace hw::cpu

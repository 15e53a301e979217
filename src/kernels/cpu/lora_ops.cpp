// The ops LoRA adapters need besides GEMMs: moving an adapter's output into (and its gradient out
// of) one column block of the fused q|k|v activations, and inverted dropout on the adapter input.
#include <cstdint>

#include "data/seed_mix.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

template <class F>
void add_columns(F* dst, int64_t stride, int64_t col0, const F* src, int64_t N, int64_t width) {
  detail::parallel_for(N, detail::worth_parallel(N * width), [&](int64_t n) {
    for (int64_t j = 0; j < width; j++) dst[n * stride + col0 + j] += src[n * width + j];
  });
}

template <class F>
void copy_columns(F* dst, const F* src, int64_t stride, int64_t col0, int64_t N, int64_t width) {
  detail::parallel_for(N, detail::worth_parallel(N * width), [&](int64_t n) {
    for (int64_t j = 0; j < width; j++) dst[n * width + j] = src[n * stride + col0 + j];
  });
}

bool dropout_keeps(uint64_t seed, int64_t i, double p) {
  // A counter-based draw: any element's mask is a pure function of (seed, i), so backward
  // regenerates it instead of storing it.
  const uint64_t z = data::mix64(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(i) + 1));
  return double(z >> 11) * 0x1.0p-53 >= p;  // uniform in [0, 1) against p
}

template <class F>
void dropout(F* out, const F* in, int64_t n, double p, uint64_t seed) {
  const F keep_scale = F(1.0 / (1.0 - p));
  detail::parallel_for(n, detail::worth_parallel(n),
                       [&](int64_t i) { out[i] = dropout_keeps(seed, i, p) ? in[i] * keep_scale : F(0); });
}

template void add_columns<float>(float*, int64_t, int64_t, const float*, int64_t, int64_t);
template void add_columns<double>(double*, int64_t, int64_t, const double*, int64_t, int64_t);
template void copy_columns<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void copy_columns<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void dropout<float>(float*, const float*, int64_t, double, uint64_t);
template void dropout<double>(double*, const double*, int64_t, double, uint64_t);

}  // namespace hw::cpu

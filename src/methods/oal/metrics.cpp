#include "headwise/methods/oal/metrics.hpp"

#include <algorithm>

#include "headwise/core/error.hpp"

namespace hw::oal {

void SequenceError::add(const double* approx, const double* exact, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double e = approx[i] - exact[i];
    err += e * e;
    energy += exact[i] * exact[i];
  }
  n += count;
}

FrozenMetrics aggregate(const std::vector<SequenceError>& per_sequence) {
  check(!per_sequence.empty(), "OAL metrics: no held-out sequences");
  FrozenMetrics m;
  for (const auto& s : per_sequence) {
    check(s.n > 0 && s.energy > 0.0, "OAL metrics: a held-out sequence with no outputs or zero energy");
    m.mse += s.err / double(s.n);
    m.rel_mse += s.err / s.energy;
  }
  m.sequences = int64_t(per_sequence.size());
  m.mse /= double(m.sequences);
  m.rel_mse /= double(m.sequences);
  return m;
}

void project(const double* heads, int64_t T, int64_t width, const double* W, int64_t C, double* out) {
  std::fill(out, out + T * C, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < width; ++i) {
      const double x = heads[t * width + i];
      if (x == 0.0) continue;
      const double* w = W + i * C;
      double* o = out + t * C;
      for (int64_t c = 0; c < C; ++c) o[c] += x * w[c];
    }
}

}  // namespace hw::oal

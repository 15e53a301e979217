#pragma once
// Shared helpers for the SAF tests: synthetic calibration samples and naive references
// written independently of the library (long double, no shortcuts).
#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"

namespace saf_test {

// Dense row-major T x T.
using Mat = std::vector<double>;

// Causal softmax by the textbook formula in long double (no max shift: inputs stay small).
inline Mat naive_causal_softmax(const Mat& s, int T) {
  Mat p(size_t(T) * T, 0.0);
  for (int i = 0; i < T; ++i) {
    long double z = 0;
    for (int j = 0; j <= i; ++j) z += std::exp((long double)s[size_t(i) * T + j]);
    for (int j = 0; j <= i; ++j) p[size_t(i) * T + j] = double(std::exp((long double)s[size_t(i) * T + j]) / z);
  }
  return p;
}

// One calibration sample: logits = base + noise_scale * N(0,1) on the causal cells (0 above).
struct Sample {
  Mat logits, probs;
};
inline std::vector<Sample> make_samples(int N, int T, double noise_scale, uint64_t seed) {
  hw::Rng rng(seed);
  Mat base(size_t(T) * T, 0.0);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) base[size_t(i) * T + j] = -0.3 * (i - j) + 0.5 * std::sin(j);
  std::vector<Sample> out(static_cast<size_t>(N));
  for (auto& s : out) {
    s.logits.assign(size_t(T) * T, 0.0);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j)
        s.logits[size_t(i) * T + j] = base[size_t(i) * T + j] + noise_scale * rng.normal();
    s.probs = naive_causal_softmax(s.logits, T);
  }
  return out;
}

}  // namespace saf_test

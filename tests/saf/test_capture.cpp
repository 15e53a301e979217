// capture: causal logits and probabilities of one head vs a naive long-double softmax.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/methods/saf/capture.hpp"

namespace {

struct Fixture {
  int T = 37, hd = 16;
  int64_t q_stride = 3 * 16 + 5, k_stride = 2 * 16;  // q, k interleaved with other heads
  std::vector<float> q, k;
  Fixture() {
    hw::Rng rng(11);
    q.resize(size_t(T * q_stride));
    k.resize(size_t(T * k_stride));
    for (auto& x : q) x = float(rng.normal());
    for (auto& x : k) x = float(rng.normal());
  }
  // Naive reference: exp of the scaled dot product divided by the causal row sum.
  void reference(std::vector<long double>& logits, std::vector<long double>& probs) const {
    logits.assign(size_t(T) * T, 0.0L);
    probs.assign(size_t(T) * T, 0.0L);
    for (int i = 0; i < T; ++i) {
      long double z = 0;
      for (int j = 0; j <= i; ++j) {
        long double dot = 0;
        for (int d = 0; d < hd; ++d) dot += (long double)q[i * q_stride + d] * k[j * k_stride + d];
        logits[size_t(i) * T + j] = dot / std::sqrt((long double)hd);
        z += std::exp(logits[size_t(i) * T + j]);
      }
      for (int j = 0; j <= i; ++j) probs[size_t(i) * T + j] = std::exp(logits[size_t(i) * T + j]) / z;
    }
  }
};

}  // namespace

TEST_CASE("capture: double logits and probabilities match a naive softmax") {
  Fixture f;
  std::vector<long double> rl, rp;
  f.reference(rl, rp);
  std::vector<double> logits(size_t(f.T) * f.T, -7.0), probs(size_t(f.T) * f.T, -7.0);
  hw::saf::causal_attention(f.q.data(), f.q_stride, f.k.data(), f.k_stride, f.T, f.hd,
                            logits.data(), probs.data());
  for (int i = 0; i < f.T; ++i) {
    double row = 0;
    for (int j = 0; j < f.T; ++j) {
      const size_t c = size_t(i) * f.T + j;
      if (j > i) {
        REQUIRE(logits[c] == 0.0);
        REQUIRE(probs[c] == 0.0);
        continue;
      }
      REQUIRE(logits[c] == Approx(double(rl[c])).margin(1e-12));
      REQUIRE(probs[c] == Approx(double(rp[c])).margin(1e-13));
      row += probs[c];
    }
    REQUIRE(row == Approx(1.0).margin(1e-13));
  }
  REQUIRE(probs[0] == 1.0);  // the first query has one key
}

TEST_CASE("capture: float outputs and null buffers") {
  Fixture f;
  std::vector<long double> rl, rp;
  f.reference(rl, rp);
  std::vector<float> probs(size_t(f.T) * f.T, -7.f);
  hw::saf::causal_attention(f.q.data(), f.q_stride, f.k.data(), f.k_stride, f.T, f.hd,
                            static_cast<float*>(nullptr), probs.data());
  for (size_t c = 0; c < probs.size(); ++c) REQUIRE(probs[c] == Approx(double(rp[c])).margin(1e-6));
  std::vector<float> logits(size_t(f.T) * f.T, -7.f);
  hw::saf::causal_attention(f.q.data(), f.q_stride, f.k.data(), f.k_stride, f.T, f.hd,
                            logits.data(), static_cast<float*>(nullptr));
  for (size_t c = 0; c < logits.size(); ++c)
    REQUIRE(logits[c] == Approx(double(rl[c])).margin(2e-5));
}

TEST_CASE("capture: bad shapes are errors") {
  Fixture f;
  std::vector<double> p(size_t(f.T) * f.T);
  REQUIRE_THROWS_AS(hw::saf::causal_attention(f.q.data(), 4, f.k.data(), f.k_stride, f.T, f.hd,
                                              nullptr, p.data()),
                    hw::Error);
  REQUIRE_THROWS_AS(hw::saf::causal_attention(f.q.data(), f.q_stride, f.k.data(), f.k_stride, 0,
                                              f.hd, nullptr, p.data()),
                    hw::Error);
}

#include "headwise/infer/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"

namespace hw::infer {

void SamplingOptions::validate() const {
  check(std::isfinite(temperature) && temperature >= 0.0,
        "--temperature must be a finite number >= 0 (0 = greedy), got " + std::to_string(temperature));
  check(top_k >= 0, "--top-k must be >= 0 (0 = no limit), got " + std::to_string(top_k));
  check(std::isfinite(top_p) && top_p > 0.0 && top_p <= 1.0, "--top-p must be in (0, 1], got " + std::to_string(top_p));
}

int32_t argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

Sampler::Sampler(const SamplingOptions& opts, int vocab, uint64_t stream)
    : opts_(opts), vocab_(vocab), rng_(data::derive_seed(opts.seed, data::Stream::Sampling, stream)) {
  opts_.validate();
  check(vocab >= 1, "sampler: vocabulary must be >= 1");
  idx_.resize(size_t(vocab));
  prob_.resize(size_t(vocab));
}

int32_t Sampler::next(const float* logits) {
  for (int i = 0; i < vocab_; ++i)
    if (std::isnan(logits[i])) fail("sampler: logit " + std::to_string(i) + " is NaN");
  if (opts_.temperature == 0.0) return argmax(logits, vocab_);
  // Candidates in descending logit order (ties: lower index first), cut to top_k.
  std::iota(idx_.begin(), idx_.end(), 0);
  const int k = opts_.top_k > 0 && opts_.top_k < vocab_ ? int(opts_.top_k) : vocab_;
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < vocab_) std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), by_logit);
  else std::sort(idx_.begin(), idx_.end(), by_logit);
  // softmax(logits / T) over the k candidates, in double.
  const double inv_t = 1.0 / opts_.temperature, mx = double(logits[idx_[0]]) * inv_t;
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += prob_[size_t(i)] = std::exp(double(logits[idx_[size_t(i)]]) * inv_t - mx);
  // Nucleus: the smallest prefix whose probability reaches top_p (at least one token).
  int n = k;
  if (opts_.top_p < 1.0) {
    double c = 0.0;
    for (int i = 0; i < k; ++i) {
      c += prob_[size_t(i)] / sum;
      if (c >= opts_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double total = 0.0;
  for (int i = 0; i < n; ++i) total += prob_[size_t(i)];
  const double u = rng_.uniform() * total;
  double c = 0.0;
  for (int i = 0; i < n; ++i) {
    c += prob_[size_t(i)];
    if (u < c) return idx_[size_t(i)];
  }
  return idx_[size_t(n - 1)];
}

}  // namespace hw::infer

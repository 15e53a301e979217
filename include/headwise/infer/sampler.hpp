#pragma once
// Next-token sampling from a row of logits: greedy (temperature 0: the first index of the
// largest logit), or a draw from softmax(logits / temperature) restricted to the top_k largest
// (0 = all) and then to the smallest set of most likely tokens whose probability reaches top_p
// (1 = all), renormalised. Draws come from one Rng seeded by derive_seed(seed, Stream::Sampling,
// stream): stream 0 for a single sequence, the sequence's index in a batch (generate_batch.hpp),
// so a seed gives the same tokens on every run, batched or not. Scratch is allocated once, for
// `vocab`.
#include <cstdint>
#include <vector>

#include "headwise/core/rng.hpp"

namespace hw::infer {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0 = greedy
  int64_t top_k = 0;         // >= 0; 0 = no limit
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 1337;
  // Throws hw::Error naming the option (--temperature, --top-k, --top-p) for a bad value.
  void validate() const;
};

class Sampler {
 public:
  Sampler(const SamplingOptions& opts, int vocab, uint64_t stream = 0);
  int32_t next(const float* logits);
  const SamplingOptions& options() const { return opts_; }

 private:
  SamplingOptions opts_;
  int vocab_;
  Rng rng_;
  std::vector<int32_t> idx_;
  std::vector<double> prob_;
};

// Index of the largest value (the first one on ties).
int32_t argmax(const float* x, int n);

}  // namespace hw::infer

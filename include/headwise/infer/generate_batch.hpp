#pragma once
// Generation of several sequences together over a BatchDecoder (batch_decoder.hpp): sequences
// enter in order while a slot is free; each step is one feed of every live sequence's next input
// (a newly admitted sequence's whole prompt, the others' last drawn token), then one draw per
// sequence from its own sampler. A sequence leaves the batch, and its slot is closed for the next
// waiting sequence, after drawing a token of its stop set (kept as its last new token, as
// transformers does) or its max_new-th token (which is not fed back). Each sequence's tokens are
// those of generate() (generate.hpp) on its prompt alone with a Sampler on stream `index`:
// greedy tokens equal, sampled ones too since every sequence draws from its own stream.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/infer/batch_decoder.hpp"
#include "headwise/infer/sampler.hpp"

namespace hw::infer {

struct SequenceRequest {
  std::vector<int32_t> prompt;  // >= 1 token, each in the vocabulary
  int64_t max_new = 0;          // >= 0 (0: the sequence is never fed)
  // Its sampler draws from derive_seed(sampling.seed, Stream::Sampling, i), i = its index in
  // the request list (sampler.hpp): sequence 0 draws what a single generate() would.
  SamplingOptions sampling;
  std::vector<int32_t> stop;  // end-of-sequence ids
};

struct BatchTimes {
  double first_ms = 0.0;       // the first step: the first admitted prompts' prefill and their first draws
  double decode_ms = 0.0;      // every later step (later admissions' prompts included)
  int64_t steps = 0;           // feeds
  int64_t first_tokens = 0;    // tokens drawn in the first step
  int64_t decode_tokens = 0;   // tokens drawn in the later steps
  int max_live = 0;            // most sequences in one feed
};

// Throws hw::Error naming the sequence (before any decoding) for an empty prompt, a token outside
// the vocabulary, max_new < 0, or prompt + max_new - 1 positions past the decoder's context; the
// decoder's slots must all be free. on_token(i, token) sees each token as it is drawn.
std::vector<std::vector<int32_t>> generate_batch(BatchDecoder& dec, const std::vector<SequenceRequest>& seqs,
                                                 const std::function<void(size_t, int32_t)>& on_token = {},
                                                 BatchTimes* times = nullptr);

}  // namespace hw::infer

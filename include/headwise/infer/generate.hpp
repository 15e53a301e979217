#pragma once
// Generation: one prefill over the prompt, then one decode step per new token (the last new
// token is not fed back). on_token, when given, sees every new token as soon as it is drawn.
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/infer/cached_decoder.hpp"
#include "headwise/infer/sampler.hpp"

namespace hw::infer {

struct GenerateTimes {
  double prefill_ms = 0.0;  // the prompt's prefill (and the first draw)
  double decode_ms = 0.0;   // every later step and draw
};

// Resets the decoder first. Throws hw::Error when prompt + max_new - 1 positions exceed the
// decoder's context or the prompt is empty. Stops early after drawing a token of `stop` (the
// model's end-of-sequence ids), which is kept as the last new token, as transformers does.
std::vector<int32_t> generate(CachedDecoder& dec, Sampler& sampler, const std::vector<int32_t>& prompt, int64_t max_new,
                              const std::function<void(int32_t)>& on_token = {}, GenerateTimes* times = nullptr,
                              const std::vector<int32_t>& stop = {});

}  // namespace hw::infer

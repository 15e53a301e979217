#include "headwise/infer/generate.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::infer {

std::vector<int32_t> generate(CachedDecoder& dec, Sampler& sampler, const std::vector<int32_t>& prompt, int64_t max_new,
                              const std::function<void(int32_t)>& on_token, GenerateTimes* times,
                              const std::vector<int32_t>& stop) {
  check(!prompt.empty(), "generate: the prompt is empty");
  check(max_new >= 0, "generate: --max-new must be >= 0");
  const int64_t need = int64_t(prompt.size()) + std::max<int64_t>(max_new - 1, 0);
  check(need <= dec.max_context(), "generate: the prompt (" + std::to_string(prompt.size()) + " tokens) and " +
                                       std::to_string(max_new) + " new tokens need " + std::to_string(need) +
                                       " positions, more than the context of " + std::to_string(dec.max_context()));
  using clock = std::chrono::steady_clock;
  dec.reset();
  std::vector<int32_t> out;
  out.reserve(size_t(max_new));
  const auto t0 = clock::now();
  const float* logits = dec.prefill(prompt.data(), int64_t(prompt.size()));
  auto t1 = clock::now();
  for (int64_t i = 0; i < max_new; ++i) {
    if (i > 0) logits = dec.step(out.back());
    out.push_back(sampler.next(logits));
    if (i == 0) t1 = clock::now();
    if (on_token) on_token(out.back());
    if (std::find(stop.begin(), stop.end(), out.back()) != stop.end()) break;
  }
  const auto t2 = clock::now();
  if (times) {
    times->prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    times->decode_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  }
  return out;
}

}  // namespace hw::infer

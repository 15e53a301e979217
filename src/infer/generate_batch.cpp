#include "headwise/infer/generate_batch.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::infer {

std::vector<std::vector<int32_t>> generate_batch(BatchDecoder& dec, const std::vector<SequenceRequest>& seqs,
                                                 const std::function<void(size_t, int32_t)>& on_token,
                                                 BatchTimes* times) {
  const int V = dec.vocab_size();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SequenceRequest& r = seqs[i];
    const std::string who = "generate: sequence " + std::to_string(i);
    check(!r.prompt.empty(), who + ": the prompt is empty");
    check(r.max_new >= 0, who + ": max_new must be >= 0");
    for (int32_t t : r.prompt)
      check(t >= 0 && t < V, who + ": token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V));
    const int64_t need = int64_t(r.prompt.size()) + std::max<int64_t>(r.max_new - 1, 0);
    check(need <= dec.max_context(), who + ": the prompt (" + std::to_string(r.prompt.size()) + " tokens) and " +
                                         std::to_string(r.max_new) + " new tokens need " + std::to_string(need) +
                                         " positions, more than the context of " + std::to_string(dec.max_context()));
    r.sampling.validate();
  }
  check(dec.live() == 0, "generate: the batch decoder has open slots");
  using clock = std::chrono::steady_clock;
  struct Live {
    size_t seq;
    int slot;
    bool fed_prompt;
  };
  std::vector<std::vector<int32_t>> out(seqs.size());
  std::vector<std::unique_ptr<Sampler>> samplers(seqs.size());
  std::vector<Live> live;
  std::vector<SlotTokens> feed;
  size_t next = 0;
  BatchTimes t;
  const auto t0 = clock::now();
  auto t1 = t0;
  while (next < seqs.size() || !live.empty()) {
    while (next < seqs.size() && dec.live() < dec.max_batch()) {  // admit in order while a slot is free
      if (seqs[next].max_new > 0) {
        samplers[next] = std::make_unique<Sampler>(seqs[next].sampling, V, uint64_t(next));
        out[next].reserve(size_t(seqs[next].max_new));
        live.push_back({next, dec.open(), false});
      }
      ++next;
    }
    if (live.empty()) break;
    feed.clear();
    for (Live& s : live) {
      const auto& r = seqs[s.seq];
      if (!s.fed_prompt) feed.push_back({s.slot, r.prompt.data(), int64_t(r.prompt.size())});
      else feed.push_back({s.slot, &out[s.seq].back(), 1});
      s.fed_prompt = true;
    }
    dec.feed(feed);
    t.max_live = std::max(t.max_live, int(live.size()));
    int64_t drawn = 0;
    for (size_t k = 0; k < live.size();) {
      const Live& s = live[k];
      const auto& r = seqs[s.seq];
      out[s.seq].push_back(samplers[s.seq]->next(dec.logits(s.slot)));
      ++drawn;
      if (on_token) on_token(s.seq, out[s.seq].back());
      const bool stop = std::find(r.stop.begin(), r.stop.end(), out[s.seq].back()) != r.stop.end();
      if (stop || int64_t(out[s.seq].size()) == r.max_new) {  // leaves the batch, frees its slot
        dec.close(s.slot);
        samplers[s.seq].reset();
        live.erase(live.begin() + std::ptrdiff_t(k));
      } else {
        ++k;
      }
    }
    if (t.steps == 0) {
      t1 = clock::now();
      t.first_tokens = drawn;
    } else {
      t.decode_tokens += drawn;
    }
    ++t.steps;
  }
  const auto t2 = clock::now();
  if (times) {
    t.first_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    t.decode_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    *times = t;
  }
  return out;
}

}  // namespace hw::infer

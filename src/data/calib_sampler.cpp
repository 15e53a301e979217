#include <algorithm>

#include "data/seed_mix.hpp"
#include "data/shard_set.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/loader.hpp"

namespace hw::data {

// Every valid window start in every shard is equally likely, which is the same as picking a
// shard with weight (its number of valid starts) and then a uniform start inside it.
struct CalibSampler::Impl {
  ShardSet data;
  int64_t T = 0;
  uint64_t seed = 0;
  std::vector<int64_t> start_begin;  // prefix sums of valid starts per shard
};

CalibSampler::CalibSampler(const std::string& glob, int64_t T, uint64_t seed, Part part)
    : impl_(std::make_shared<Impl>()) {
  check(T > 0, "calibration sampler for '" + glob + "': T must be positive (T=" + std::to_string(T) + ")");
  auto& m = *impl_;
  m.data = ShardSet::load(glob);
  keep_part(m.data, part);
  m.T = T;
  m.seed = seed;
  m.start_begin.push_back(0);
  for (const auto& tok : m.data.tokens) {
    const auto ntok = static_cast<int64_t>(tok.size());
    m.start_begin.push_back(m.start_begin.back() + std::max<int64_t>(ntok - T, 0));  // window = T+1 tokens
  }
  check(m.start_begin.back() > 0, "calibration data '" + glob + "'" + part_name(part) + " has no window of T+1 = " +
                                      std::to_string(T + 1) + " tokens in one shard (" +
                                      std::to_string(m.data.total_tokens) + " tokens in all)");
}

void CalibSampler::fetch(int64_t index, int32_t* inputs, int32_t* targets) const {
  const auto& m = *impl_;
  check(index >= 0, "calibration sampler: negative window index " + std::to_string(index));
  Rng rng(derive_seed(m.seed, Stream::CalibWindow, static_cast<uint64_t>(index)));
  const auto pick = static_cast<int64_t>(rng.below(static_cast<uint64_t>(m.start_begin.back())));
  const auto shard = static_cast<size_t>(
      std::upper_bound(m.start_begin.begin(), m.start_begin.end(), pick) - m.start_begin.begin() - 1);
  const int32_t* src = m.data.tokens[shard].data() + (pick - m.start_begin[shard]);
  for (int64_t t = 0; t < m.T; ++t) {
    inputs[t] = src[t];
    targets[t] = src[t + 1];
  }
}

}  // namespace hw::data

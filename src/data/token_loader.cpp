#include <algorithm>
#include <mutex>

#include "data/seed_mix.hpp"
#include "data/shard_set.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/loader.hpp"

namespace hw::data {

// A "slot" is one sequence position: shard s, start k*T. Slots are numbered shard by shard;
// shard s owns slots [slot_begin[s], slot_begin[s+1]), always a multiple of B of them.
struct TokenLoader::Impl {
  ShardSet data;
  int64_t B = 0, T = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  std::vector<int64_t> slot_begin;
  int64_t n_slots = 0;

  // The current epoch's permutation, rebuilt when fetch moves to another epoch. The mutex
  // only protects the cache; the result never depends on which epoch was cached before.
  mutable std::mutex mu;
  mutable int64_t perm_epoch = -1;
  mutable std::vector<int64_t> perm;

  const std::vector<int64_t>& permutation(int64_t epoch) const {
    if (perm_epoch != epoch) {
      perm.resize(static_cast<size_t>(n_slots));
      for (int64_t i = 0; i < n_slots; ++i) perm[static_cast<size_t>(i)] = i;
      Rng rng(derive_seed(seed, Stream::EpochShuffle, static_cast<uint64_t>(epoch)));
      for (int64_t i = n_slots - 1; i > 0; --i) {  // Fisher-Yates
        const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
        std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
      }
      perm_epoch = epoch;
    }
    return perm;
  }
};

TokenLoader::TokenLoader(const std::string& glob, int64_t B, int64_t T, bool shuffle, uint64_t seed, Part part)
    : impl_(std::make_shared<Impl>()) {
  check(B > 0 && T > 0, "data loader for '" + glob + "': B and T must be positive (B=" + std::to_string(B) +
                            ", T=" + std::to_string(T) + ")");
  auto& m = *impl_;
  m.data = ShardSet::load(glob);
  keep_part(m.data, part);
  m.B = B;
  m.T = T;
  m.shuffle = shuffle;
  m.seed = seed;
  m.slot_begin.push_back(0);
  int64_t largest = 0;
  for (const auto& tok : m.data.tokens) {
    const auto ntok = static_cast<int64_t>(tok.size());
    largest = std::max(largest, ntok);
    const int64_t batches = ntok > 0 ? (ntok - 1) / (B * T) : 0;  // a batch needs B*T+1 tokens
    m.slot_begin.push_back(m.slot_begin.back() + batches * B);
  }
  m.n_slots = m.slot_begin.back();
  check(m.n_slots > 0, "data '" + glob + "'" + part_name(part) + " has no full micro-batch: B=" + std::to_string(B) +
                           ", T=" + std::to_string(T) + " needs " + std::to_string(B * T + 1) +
                           " tokens in one shard, the largest has " + std::to_string(largest) + " (" +
                           std::to_string(m.data.total_tokens) + " in all)");
}

void TokenLoader::fetch(int64_t index, int32_t* inputs, int32_t* targets) const {
  const auto& m = *impl_;
  check(index >= 0, "data loader: negative batch index " + std::to_string(index));
  const int64_t per_epoch = m.n_slots / m.B;
  const int64_t epoch = index / per_epoch;
  const int64_t first = (index % per_epoch) * m.B;
  std::lock_guard<std::mutex> lock(m.mu);
  const std::vector<int64_t>* perm = m.shuffle ? &m.permutation(epoch) : nullptr;
  for (int64_t j = 0; j < m.B; ++j) {
    const int64_t slot = perm ? (*perm)[static_cast<size_t>(first + j)] : first + j;
    const auto shard = static_cast<size_t>(
        std::upper_bound(m.slot_begin.begin(), m.slot_begin.end(), slot) - m.slot_begin.begin() - 1);
    const int32_t* src = m.data.tokens[shard].data() + (slot - m.slot_begin[shard]) * m.T;
    int32_t* in = inputs + j * m.T;
    int32_t* tg = targets + j * m.T;
    for (int64_t t = 0; t < m.T; ++t) {
      in[t] = src[t];
      tg[t] = src[t + 1];
    }
  }
}

int64_t TokenLoader::batches_per_epoch() const { return impl_->n_slots / impl_->B; }
int64_t TokenLoader::total_tokens() const { return impl_->data.total_tokens; }
const std::vector<std::string>& TokenLoader::files() const { return impl_->data.files; }

}  // namespace hw::data

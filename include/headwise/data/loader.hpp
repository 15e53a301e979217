#pragma once
// Batches from token shards, addressed by index so that the loader position is one integer
// that the trainer saves, and so that data-parallel ranks can read their own slice of every
// global batch (rank r takes global micro-batch indices r, r+W, ...).
//
// Sequences are windows of T+1 tokens starting every T tokens inside a shard. A micro-batch
// is B consecutive sequences of the epoch's order; with shuffle off the order is natural, so a
// micro-batch is B*T+1 consecutive tokens (inputs tokens[0..BT), targets tokens[1..BT]) and
// each starts B*T tokens after the previous one; each shard contributes a whole number of
// micro-batches (a shard's tail shorter than B*T+1 tokens is skipped). With shuffle on, the
// sequences are permuted per epoch by a seed-derived permutation.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hw::data {

// Which part of a glob's tokens a reader sees. The halves split the tokens of all shards, taken
// in file order as one stream, at token floor(N / 2): FirstHalf keeps tokens [0, N/2),
// SecondHalf [N/2, N) (the shard holding the split point is cut there, so no window crosses
// it). data.val_split = "halves" calibrates on the first half of data.val and evaluates on the
// second (run_config.hpp).
enum class Part { All, FirstHalf, SecondHalf };
std::string part_name(Part part);  // "", " (first half)", " (second half)": for messages

class TokenLoader {
 public:
  TokenLoader(const std::string& glob, int64_t B, int64_t T, bool shuffle, uint64_t seed, Part part = Part::All);
  // Fill inputs[B*T] and targets[B*T] for global micro-batch `index` (any index >= 0; epochs
  // wrap around). Deterministic: depends only on (files, B, T, shuffle, seed, index).
  void fetch(int64_t index, int32_t* inputs, int32_t* targets) const;
  int64_t batches_per_epoch() const;
  int64_t total_tokens() const;
  const std::vector<std::string>& files() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Calibration stream: random windows of T+1 tokens, drawn with replacement from its own seed;
// window `index` depends only on (files, T, seed, index), so drawing calibration windows
// never moves any training position.
class CalibSampler {
 public:
  CalibSampler(const std::string& glob, int64_t T, uint64_t seed, Part part = Part::All);
  void fetch(int64_t index, int32_t* inputs, int32_t* targets) const;  // one sequence of T

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hw::data

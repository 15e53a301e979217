#pragma once
// Seeds for independent random streams derived from (seed, stream, index), so that every
// batch, epoch permutation or calibration window is a pure function of its own index and
// drawing one never advances another.
#include <cstdint>

namespace hw::data {

// Stream tags keep e.g. the epoch permutation and the calibration windows uncorrelated even
// when a user passes the same seed to both.
// Every random stream of the project is derived here, from one tag each.
enum class Stream : uint64_t {
  EpochShuffle = 1,
  CalibWindow = 2,
  Mqar = 3,
  SyntheticTokens = 4,   // Trainer: uniform random batches (benchmarks), index = global micro-batch
  SafPattern = 5,        // SAF: sampled target patterns (gaussian, dirichlet, structured_random)
  SafRandomSelect = 6,   // SAF: the random-selection control
  MqarCalib = 7,         // MQAR: SAF's calibration examples
  MqarEval = 8,          // MQAR: evaluation examples, index = pair count
  AahPolicy = 9,         // AAH: the seeded controller (index 0) and joint sibling scorer (1)
  AahGrouping = 10,      // AAH: fixed_random_grouping's balanced split, index = layer
  AahAblation = 11,      // AAH: random_uniform / shuffle_post_select draws, index = update
  LoraInit = 12,         // Model: LoRA adapters' A matrices
  LoraDropout = 13,      // Trainer: a micro-batch's dropout seed, index = global micro-batch (Model: LoRA's sites)
  Sampling = 14,         // generate: next-token draws (infer/sampler.hpp), index 0
  AohRandomSelect = 15,  // AoH: the random-selection control, index = group (0 global, or layer)
  PerformerFeatures = 16,  // Model: performer heads' random features, index = layer * 65536 + head
  OalBootstrap = 18,       // OAL: prompt resamples of the bootstrap grouping, index = layer * n_head + head
  OalRandomGrouping = 19,  // OAL: the random-grouping control, index = layer * n_head + head
  OalCalibration = 20,     // OAL: calibration windows (index 0 stats, 1 fit/val) and L fits (index 16 + flat head)
  OalBaselineFeatures = 21,  // OAL: performer features of converted heads, index = layer * n_head + head
  OalBaselineFit = 22,       // OAL: Table 2's fits of the baselines' learnable values, index = layer * n_head + head
  ModelDropout = 23,         // Model: resid_pdrop / embd_pdrop masks of one micro-batch, index = 3 (layer + 1) + site
};

// splitmix64's finaliser: a bijection on 64 bits with good avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t derive_seed(uint64_t seed, Stream stream, uint64_t index) {
  const uint64_t a = mix64(seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(stream));
  return mix64(a ^ mix64(index + 0xD1B54A32D192ED03ull));
}

}  // namespace hw::data

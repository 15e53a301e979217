#pragma once
// Internal to the Trainer's files (src/train/trainer*.cpp): an arena's whole block as floats
// (tensors plus zero padding), what the collectives, the ZeRO-1 shard and the checkpoint's
// replica check work on. It lives in the backend's memory: host code only hands it to ops,
// collectives and copies.
#include <cstdint>
#include <string>

#include "headwise/core/arena.hpp"

namespace hw::trainer_detail {

inline float* block_of(Arena& a) { return static_cast<float*>(a.base()); }
inline const float* block_of(const Arena& a) { return static_cast<const float*>(a.base()); }
inline int64_t floats_of(const Arena& a) { return int64_t(a.bytes() / sizeof(float)); }

// A rank's ZeRO-1 optimizer shard inside checkpoint DIR.
inline std::string shard_file(const std::string& dir, int rank) {
  return dir + "/optimizer.rank" + std::to_string(rank) + ".safetensors";
}

}  // namespace hw::trainer_detail

#pragma once
// Work split of the CUDA encoder backward's token-embedding gradient (dwte[token] += dout
// row), which must be deterministic although tokens repeat: a warp owns 32 channels of every
// token in one bucket (token mod buckets) and walks all positions in order, adding the rows
// of its bucket's tokens. Every dwte element therefore receives its additions from one thread
// in position order: the same float sequence as the CPU reference, whatever the bucket count.
// The bucket count only spreads work; no index or counting-sort scratch is needed.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr int kEncoderWarpChannels = 32;    // channels per warp (one per lane)
constexpr int kEncoderWarpsPerBlock = 8;    // buckets per block (one per warp)
constexpr int kEncoderTokenTile = 1024;     // positions staged in shared memory at a time
constexpr int64_t kEncoderTargetWarps = 2048;  // enough warps to fill a large GPU

// Buckets for channel count C: about kEncoderTargetWarps warps in all, a multiple of the
// warps per block, in [8, 256] (more buckets cost every warp a scan of all positions).
HW_HOST_DEVICE int64_t encoder_buckets(int64_t C) {
  const int64_t groups = C <= 0 ? 1 : (C + kEncoderWarpChannels - 1) / kEncoderWarpChannels;
  int64_t k = kEncoderTargetWarps / groups;
  if (k < kEncoderWarpsPerBlock) k = kEncoderWarpsPerBlock;
  if (k > 256) k = 256;
  return (k + kEncoderWarpsPerBlock - 1) / kEncoderWarpsPerBlock * kEncoderWarpsPerBlock;
}

// The bucket of a token (ids are non-negative; the unsigned view keeps a bad id in range).
HW_HOST_DEVICE int64_t encoder_bucket_of(int32_t token, int64_t buckets) {
  return static_cast<int64_t>(static_cast<uint32_t>(token) % static_cast<uint32_t>(buckets));
}

}  // namespace hw::tiles

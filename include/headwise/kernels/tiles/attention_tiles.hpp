#pragma once
// Tile geometry of the CUDA mixed-head attention (src/kernels/cuda/attention_*.cu): the
// shapes every item kind shares. Host+device so the CPU tests exercise the same indexing.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr int kBr = 64;           // query rows per tile (also the linear heads' chunk length)
constexpr int kBc = 64;           // keys per tile
constexpr int kAttnThreads = 256;  // threads of every attention block (all item kinds)

HW_HOST_DEVICE int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace hw::tiles

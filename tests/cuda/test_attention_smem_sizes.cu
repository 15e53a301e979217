// Shared-memory carving of the CUDA attention items, fp32 (SIMT) and bf16 (tensor cores). At compile
// time: every region an item carves out of its allocation (tiles, stage, lse/delta, the exchange
// between the two warps of a row block that reuses the tiles) ends inside the allocation the
// launcher asks for, vector-loaded word tiles start on 16-byte boundaries, and the sizes equal the
// table in attention_params.hpp (so that comment cannot go stale silently). On the GPU: the largest
// per-item need of each precision fits the device's opt-in shared memory per block, which
// cudaFuncSetAttribute must grant before the first launch.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/attention_linear.cuh"
#include "kernels/cuda/attention_mma_backward.cuh"
#include "kernels/cuda/attention_mma_forward.cuh"
#include "kernels/cuda/attention_mma_static.cuh"
#include "kernels/cuda/attention_softmax_backward.cuh"
#include "kernels/cuda/attention_softmax_forward.cuh"
#include "kernels/cuda/attention_static.cuh"

namespace {

namespace am = hw::cuda::attn_mma;
namespace ad = hw::cuda::attn_dev;
namespace ai = hw::cuda::attn_items;
constexpr int kF = int(sizeof(float));

// ---- bf16 carve offsets (bytes), as the items compute them ----
template <int HD>
constexpr int word_tile_bytes() {
  return 64 * am::kLdw<HD> * kF;
}
// softmax forward: Q, K[2], V[2] word tiles; exchange: 64 x kXld O rows, then 64 maxima and 64 sums.
template <int HD>
constexpr bool forward_carve_fits() {
  constexpr int tiles_end = 5 * word_tile_bytes<HD>();
  constexpr int exchange_end = (64 * am::kXld<HD> + 64 + 64) * kF;
  return tiles_end <= am::forward_smem_bytes<HD>() && exchange_end <= am::forward_smem_bytes<HD>();
}
// dQ / dK-dV items: six word tiles (two of them the double buffers), then lse and delta (dQ) or
// lse[2] and delta (dK/dV), 64 floats each; exchange: dK and dV blocks.
template <int HD>
constexpr bool backward_carve_fits() {
  constexpr int lse_delta_end = 6 * word_tile_bytes<HD>() + 3 * 64 * kF;
  constexpr int exchange_end = 2 * 64 * am::kXld<HD> * kF;
  // (The exchange reuses the tiles: by then no warp reads them, nor lse and delta.)
  return lse_delta_end <= am::backward_smem_bytes<HD>() && exchange_end <= am::backward_smem_bytes<HD>();
}
// static forward: two buffers of a V word tile and its 256-float stage, each starting on a
// 16-byte boundary (cp.async destinations); exchange: 64 x kXld O rows.
template <int HD>
constexpr bool static_forward_carve_fits() {
  constexpr int buffer = word_tile_bytes<HD>() + hw::tiles::mma::kStaticStage * kF;
  static_assert(buffer == am::static_buffer_floats<HD>() * kF && buffer % 16 == 0, "static buffers");
  constexpr int stage_end = 2 * buffer;
  constexpr int exchange_end = 64 * am::kXld<HD> * kF;
  return stage_end <= am::static_forward_smem_bytes<HD>() && exchange_end <= am::static_forward_smem_bytes<HD>();
}
// static dK/dV: dv_acc [64][HD] fp32, then the scratch (dO word tile + stage) at smem + 64 HD floats.
template <int HD>
constexpr int static_dkv_bytes() {
  return 64 * HD * kF + am::static_tiles_bytes<HD>();
}
template <int HD>
constexpr bool static_backward_carve_fits() {
  constexpr int scratch = 64 * HD * kF;
  constexpr int stage_end = scratch + 2 * (word_tile_bytes<HD>() + hw::tiles::mma::kStaticStage * kF);
  return scratch % 16 == 0 && stage_end <= static_dkv_bytes<HD>();
}

static_assert(forward_carve_fits<64>() && forward_carve_fits<128>(), "bf16 softmax forward carve");
static_assert(backward_carve_fits<64>() && backward_carve_fits<128>(), "bf16 softmax backward carve");
static_assert(static_forward_carve_fits<64>() && static_forward_carve_fits<128>(), "bf16 static forward carve");
static_assert(static_backward_carve_fits<64>() && static_backward_carve_fits<128>(), "bf16 static dK/dV carve");
// uint4 stores into word tiles: every tile starts, and every row is, a multiple of 16 bytes.
static_assert(word_tile_bytes<64>() % 16 == 0 && word_tile_bytes<128>() % 16 == 0, "word tiles 16-byte aligned");
static_assert((am::kLdw<64> * 4) % 16 == 0 && (am::kLdw<128> * 4) % 16 == 0, "word tile rows 16-byte aligned");

// The table of attention_params.hpp (bf16 column, then fp32 column).
static_assert(am::forward_smem_bytes<64>() == 46080 && am::forward_smem_bytes<128>() == 87040, "table");
static_assert(am::backward_smem_bytes<64>() == 56064 && am::backward_smem_bytes<128>() == 105216, "table");
static_assert(am::static_forward_smem_bytes<64>() == 20480 && am::static_forward_smem_bytes<128>() == 36864, "table");
static_assert(am::static_tiles_bytes<64>() == 20480 && am::static_tiles_bytes<128>() == 36864, "table");
static_assert(ai::softmax_forward_smem_floats<64>() * kF == 67328 && ai::softmax_forward_smem_floats<128>() * kF == 116480,
              "table");
static_assert(ai::softmax_backward_smem_floats<64>() * kF == 100352 &&
                  ai::softmax_backward_smem_floats<128>() * kF == 165888,
              "table");
static_assert(ad::static_forward_smem_bytes<64>() == 33280 && ad::static_forward_smem_bytes<128>() == 49664, "table");
static_assert(ad::static_backward_smem_bytes<64>() == 33280 && ad::static_backward_smem_bytes<128>() == 49664, "table");
static_assert(ad::linear_forward_smem_bytes<64, float>() == 75520 &&
                  ad::linear_forward_smem_bytes<128, float>() == 91136,
              "table");
static_assert(ad::linear_backward_smem_bytes<64, float>() == 97024 &&
                  ad::linear_backward_smem_bytes<128, float>() == 128768,
              "table");
static_assert(ad::linear_forward_smem_bytes<64, hw::bf16>() == 83584 &&
                  ad::linear_forward_smem_bytes<128, hw::bf16>() == 95616,
              "table");
static_assert(ad::linear_backward_smem_bytes<64, hw::bf16>() == 107776 &&
                  ad::linear_backward_smem_bytes<128, hw::bf16>() == 135936,
              "table");
// The tensor-core strides (8 mod 32) and every tile offset on a 16-byte boundary.
static_assert(ad::LinCfg<64, hw::bf16>::LDU % 32 == 8 && ad::LinCfg<128, hw::bf16>::LDU % 32 == 8 &&
                  ad::LinCfg<64, hw::bf16>::LDP % 32 == 8,
              "linear tensor-core strides");

// The largest per-item need of a precision at head_dim HD (what the launchers may ask for).
template <int HD>
constexpr int bf16_max_need() {
  return std::max({am::forward_smem_bytes<HD>(), am::backward_smem_bytes<HD>(), am::static_forward_smem_bytes<HD>(),
                   static_dkv_bytes<HD>(), ad::linear_forward_smem_bytes<HD, hw::bf16>(),
                   ad::linear_backward_smem_bytes<HD, hw::bf16>()});
}
template <int HD>
constexpr int fp32_max_need() {
  return std::max({ai::softmax_forward_smem_floats<HD>() * kF, ai::softmax_backward_smem_floats<HD>() * kF,
                   ad::static_forward_smem_bytes<HD>(), 64 * HD * kF + ad::static_backward_smem_bytes<HD>(),
                   ad::linear_forward_smem_bytes<HD, float>(), ad::linear_backward_smem_bytes<HD, float>()});
}

// The word tiles make the bf16 softmax-family and static items smaller than their fp32 SIMT
// counterparts. Not the whole launch: the bf16 linear items keep fp32 tiles with the tensor-core
// strides, so at head_dim 64 the bf16 linear backward (107,776 B) needs more than anything of the
// fp32 path (softmax backward, 100,352 B). Compile-time facts, so CI checks them without a GPU.
static_assert(am::forward_smem_bytes<64>() < ai::softmax_forward_smem_floats<64>() * kF &&
                  am::forward_smem_bytes<128>() < ai::softmax_forward_smem_floats<128>() * kF,
              "bf16 softmax forward smaller than fp32");
static_assert(am::backward_smem_bytes<64>() < ai::softmax_backward_smem_floats<64>() * kF &&
                  am::backward_smem_bytes<128>() < ai::softmax_backward_smem_floats<128>() * kF,
              "bf16 softmax backward smaller than fp32");
static_assert(am::static_forward_smem_bytes<64>() < ad::static_forward_smem_bytes<64>() &&
                  am::static_forward_smem_bytes<128>() < ad::static_forward_smem_bytes<128>(),
              "bf16 static forward smaller than fp32");
static_assert(bf16_max_need<64>() == ad::linear_backward_smem_bytes<64, hw::bf16>() &&
                  bf16_max_need<64>() > fp32_max_need<64>(),
              "at head_dim 64 the bf16 linear backward is the largest item of either precision");
// Hopper's opt-in limit per block is 227 KB (232,448 B), Ampere's (sm_80) 163 KB (166,912 B):
// every item must fit the smaller one.
constexpr int kSm80OptIn = 166912;
static_assert(bf16_max_need<64>() <= kSm80OptIn && bf16_max_need<128>() <= kSm80OptIn &&
                  fp32_max_need<64>() <= kSm80OptIn && fp32_max_need<128>() <= kSm80OptIn,
              "every item fits sm_80's opt-in shared memory");

}  // namespace

TEST_CASE("attention shared memory: every item's need fits the device's opt-in limit per block") {
  int dev = 0, optin = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess);
  INFO("opt-in shared memory per block: " << optin << " bytes");
  CHECK(bf16_max_need<64>() <= optin);
  CHECK(bf16_max_need<128>() <= optin);
  CHECK(fp32_max_need<64>() <= optin);
  CHECK(fp32_max_need<128>() <= optin);
}

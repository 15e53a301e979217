// Encoder backward, accumulating and deterministic without scratch memory.
// dwte: tokens repeat, so rows cannot be scattered in parallel. A warp owns 32 channels of the
// tokens in one bucket (token mod buckets, tiles/encoder_buckets.hpp) and walks every position
// in order: the block stages a tile of token ids in shared memory, each warp votes which of 32
// positions hold its bucket's tokens and adds those dout rows one after another. Each dwte
// element is thus updated by one thread in position order: the CPU reference's exact float
// sequence. dwpe: one thread per (t, c) adds the B rows in order. dout is float or bf16 (S,
// widened exactly); dwte and dwpe are float.
#include "headwise/kernels/tiles/encoder_buckets.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

// Block (32 lanes, kEncoderWarpsPerBlock warps); grid (channel groups, bucket groups).
// Per group of 32 positions the warp first loads the dout values of all its hits (independent
// loads that overlap), then adds them in position order. The dwte element being added to stays
// in a register while consecutive hits share a token (frequent tokens dominate their bucket);
// it is written back before another token's element is read, so the float sequence per
// element is unchanged.
template <class S>
__global__ void encoder_dwte_kernel(float* dwte, const S* dout, const int32_t* tokens, int64_t N, int64_t C,
                                    int64_t buckets) {
  __shared__ int32_t tile[tiles::kEncoderTokenTile];
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tiles::kEncoderWarpChannels + lane;
  const bool has_c = c < C;
  const int64_t bucket = static_cast<int64_t>(blockIdx.y) * tiles::kEncoderWarpsPerBlock + warp;
  const bool active = bucket < buckets;  // inactive warps still join the tile barriers
  const int tid = warp * 32 + lane, threads = 32 * tiles::kEncoderWarpsPerBlock;
  bool held = false;  // acc holds dwte[held_token, c]
  int32_t held_token = 0;
  float acc = 0.0f;
  for (int64_t base = 0; base < N; base += tiles::kEncoderTokenTile) {
    const int64_t count = N - base < tiles::kEncoderTokenTile ? N - base : tiles::kEncoderTokenTile;
    for (int64_t j = tid; j < count; j += threads) tile[j] = tokens[base + j];
    __syncthreads();
    if (active) {
      for (int64_t j0 = 0; j0 < count; j0 += 32) {
        const int64_t j = j0 + lane;
        const int32_t tok = j < count ? tile[j] : 0;
        const bool mine = j < count && tiles::encoder_bucket_of(tok, buckets) == bucket;
        const unsigned hits = __ballot_sync(dev::kFullMask, mine);  // the same in every lane
        if (hits == 0) continue;
        float vals[32];
#pragma unroll
        for (int k = 0; k < 32; k++)
          vals[k] = ((hits >> k) & 1U) && has_c ? dev::load1(dout, (base + j0 + k) * C + c) : 0.0f;
#pragma unroll
        for (int k = 0; k < 32; k++) {
          if (!((hits >> k) & 1U)) continue;
          const int32_t t = __shfl_sync(dev::kFullMask, tok, k);
          if (!has_c) continue;
          if (!held || t != held_token) {
            if (held) dwte[static_cast<int64_t>(held_token) * C + c] = acc;
            held = true;
            held_token = t;
            acc = dwte[static_cast<int64_t>(t) * C + c];
          }
          acc += vals[k];
        }
      }
    }
    __syncthreads();  // the tile is rewritten next
  }
  if (held) dwte[static_cast<int64_t>(held_token) * C + c] = acc;
}

// dwpe[t, c] += dout[0, t, c] + dout[1, t, c] + ... in b order (float, as the CPU reference).
template <class S>
__global__ void encoder_dwpe_kernel(float* dwpe, const S* dout, int64_t B, int64_t T, int64_t C) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < T * C; i += stride) {
    float g = dwpe[i];
    for (int64_t b = 0; b < B; b++) g += dev::load1(dout, b * T * C + i);
    dwpe[i] = g;
  }
}

template <class S>
void launch_encoder_backward_t(cudaStream_t stream, float* dwte, float* dwpe, const S* dout, const int32_t* tokens,
                               int64_t B, int64_t T, int64_t C) {
  const int64_t N = B * T;
  if (N <= 0 || C <= 0) return;
  if (dwte) {
    const int64_t buckets = tiles::encoder_buckets(C);
    const dim3 grid(static_cast<unsigned>((C + tiles::kEncoderWarpChannels - 1) / tiles::kEncoderWarpChannels),
                    static_cast<unsigned>(buckets / tiles::kEncoderWarpsPerBlock));
    launch_kernel(encoder_dwte_kernel<S>, grid, dim3(32, tiles::kEncoderWarpsPerBlock), 0, stream, dwte, dout, tokens,
                  N, C, buckets);
    check_launch("encoder_dwte_kernel");
  }
  if (dwpe) {
    const int64_t blocks = tiles::stride_grid_blocks(T * C, tiles::kOpThreads, tiles::kOpMaxBlocks);
    launch_kernel(encoder_dwpe_kernel<S>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, dwpe, dout, B, T,
                  C);
    check_launch("encoder_dwpe_kernel");
  }
}

}  // namespace

void launch_encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout,
                             const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  launch_encoder_backward_t(stream, dwte, dwpe, dout, tokens, B, T, C);
}

void launch_encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens,
                             int64_t B, int64_t T, int64_t C) {
  launch_encoder_backward_t(stream, dwte, dwpe, dout, tokens, B, T, C);
}

}  // namespace hw::cuda

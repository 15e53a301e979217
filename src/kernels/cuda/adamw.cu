// Fused AdamW: one pass reads p, g, m, v and writes p, m, v (formula in kernels/adamw_step.hpp,
// element math in tiles/pointwise_math.hpp). The bf16 variant also writes a stochastically
// rounded bf16 copy of the updated fp32 master weights (tiles/bf16_stochastic.hpp).
#include "headwise/kernels/tiles/bf16_stochastic.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/pointwise_math.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

__device__ __forceinline__ void adamw4(float4& p, float4 g, float4& m, float4& v, const AdamWStep& s) {
  tiles::adamw_element(p.x, g.x, m.x, v.x, s);
  tiles::adamw_element(p.y, g.y, m.y, v.y, s);
  tiles::adamw_element(p.z, g.z, m.z, v.z, s);
  tiles::adamw_element(p.w, g.w, m.w, v.w, s);
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWStep s,
                             tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    float4 p4 = dev::load4(p, i), m4 = dev::load4(m, i), v4 = dev::load4(v, i);
    adamw4(p4, dev::load4(g, i), m4, v4, s);
    dev::store4(p, i, p4);
    dev::store4(m, i, m4);
    dev::store4(v, i, v4);
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride) {
    float pi = p[i], mi = m[i], vi = v[i];
    tiles::adamw_element(pi, g[i], mi, vi, s);
    p[i] = pi, m[i] = mi, v[i] = vi;
  }
}

__device__ __forceinline__ void store_bf16(__nv_bfloat16* out, int64_t i, float x, uint32_t seed) {
  __nv_bfloat16_raw raw;
  raw.x = tiles::bf16_bits_stochastic(x, tiles::rounding_bits(seed, static_cast<uint64_t>(i)));
  out[i] = __nv_bfloat16(raw);
}

__global__ void adamw_bf16_sr_kernel(float* master, __nv_bfloat16* p_bf16, const float* g, float* m, float* v,
                                     int64_t n, AdamWStep s, uint32_t seed, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    float4 p4 = dev::load4(master, i), m4 = dev::load4(m, i), v4 = dev::load4(v, i);
    adamw4(p4, dev::load4(g, i), m4, v4, s);
    dev::store4(master, i, p4);
    dev::store4(m, i, m4);
    dev::store4(v, i, v4);
    store_bf16(p_bf16, 4 * i, p4.x, seed);
    store_bf16(p_bf16, 4 * i + 1, p4.y, seed);
    store_bf16(p_bf16, 4 * i + 2, p4.z, seed);
    store_bf16(p_bf16, 4 * i + 3, p4.w, seed);
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride) {
    float pi = master[i], mi = m[i], vi = v[i];
    tiles::adamw_element(pi, g[i], mi, vi, s);
    master[i] = pi, m[i] = mi, v[i] = vi;
    store_bf16(p_bf16, i, pi, seed);
  }
}

bool all_aligned(const float* p, const float* g, const float* m, const float* v) {
  return tiles::aligned16(p) && tiles::aligned16(g) && tiles::aligned16(m) && tiles::aligned16(v);
}

}  // namespace

void launch_adamw_update(cudaStream_t stream, float* p, const float* g, float* m, float* v, int64_t n,
                         const AdamWStep& s) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(n, all_aligned(p, g, m, v));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(adamw_kernel, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, p, g, m, v, n, s, split);
  check_launch("adamw_kernel");
}

void launch_adamw_update_bf16_sr(cudaStream_t stream, float* master, __nv_bfloat16* p_bf16, const float* g,
                                 float* m, float* v, int64_t n, const AdamWStep& s, uint32_t seed) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(n, all_aligned(master, g, m, v));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(adamw_bf16_sr_kernel, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, master, p_bf16, g, m,
                v, n, s, seed, split);
  check_launch("adamw_bf16_sr_kernel");
}

}  // namespace hw::cuda

// LayerNorm backward, accumulating: dinp by one warp per row (row sums in double, as the CPU
// reference), dweight/dbias by deterministic column sums over rows (ops_column_sum.cuh).
// dinp, dout and inp are float or bf16 (T; dinp is read, added to in fp32 and rounded once);
// weight, mean, rstd, dweight and dbias are float.
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_column_sum.cuh"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

// dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * weight.
template <class T>
__global__ void layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const float* weight, const float* mean,
                                      const float* rstd, int64_t N, int64_t C, bool vec) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * tiles::kRowsPerBlock + threadIdx.x / 32;
  if (n >= N) return;
  const tiles::Vec4Split split = tiles::vec4_split(C, vec);
  const T* x = inp + n * C;
  const T* dy = dout + n * C;
  T* dx = dinp + n * C;
  const float m = mean[n], rs = rstd[n];

  double g_sum = 0.0, gx_sum = 0.0;
  for (int64_t i = lane; i < split.vec_items; i += 32) {
    const float4 xv = dev::load4(x, i), d = dev::load4(dy, i), w = dev::load4(weight, i);
    const float g0 = d.x * w.x, g1 = d.y * w.y, g2 = d.z * w.z, g3 = d.w * w.w;
    g_sum += static_cast<double>(g0) + g1 + static_cast<double>(g2) + g3;
    gx_sum += static_cast<double>(g0 * ((xv.x - m) * rs)) + static_cast<double>(g1 * ((xv.y - m) * rs)) +
              static_cast<double>(g2 * ((xv.z - m) * rs)) + static_cast<double>(g3 * ((xv.w - m) * rs));
  }
  for (int64_t i = split.tail_begin + lane; i < C; i += 32) {
    const float g = dev::load1(dy, i) * weight[i];
    g_sum += g;
    gx_sum += static_cast<double>(g * ((dev::load1(x, i) - m) * rs));
  }
  const float g_mean = static_cast<float>(dev::warp_sum(g_sum) / static_cast<double>(C));
  const float gx_mean = static_cast<float>(dev::warp_sum(gx_sum) / static_cast<double>(C));

  for (int64_t i = lane; i < split.vec_items; i += 32) {
    const float4 xv = dev::load4(x, i), d = dev::load4(dy, i), w = dev::load4(weight, i);
    float4 o = dev::load4(dx, i);
    o.x += (d.x * w.x - g_mean - (xv.x - m) * rs * gx_mean) * rs;
    o.y += (d.y * w.y - g_mean - (xv.y - m) * rs * gx_mean) * rs;
    o.z += (d.z * w.z - g_mean - (xv.z - m) * rs * gx_mean) * rs;
    o.w += (d.w * w.w - g_mean - (xv.w - m) * rs * gx_mean) * rs;
    dev::store4(dx, i, o);
  }
  for (int64_t i = split.tail_begin + lane; i < C; i += 32)
    dev::store1(dx, i,
                dev::load1(dx, i) +
                    (dev::load1(dy, i) * weight[i] - g_mean - (dev::load1(x, i) - m) * rs * gx_mean) * rs);
}

// Column terms: dweight gets dout * xhat, dbias gets dout (the CPU reference's float terms).
template <class T>
struct LayerNormParamTerm {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void operator()(int64_t n, int64_t c, float (&t)[2]) const {
    const float dy = dev::load1(dout, n * C + c);
    t[0] = dy * ((dev::load1(inp, n * C + c) - mean[n]) * rstd[n]);
    t[1] = dy;
  }
};

template <class T>
void launch_layernorm_backward_t(cudaStream_t stream, T* dinp, float* dweight, float* dbias, const T* dout,
                                 const T* inp, const float* weight, const float* mean, const float* rstd, int64_t N,
                                 int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) {
    const bool vec = tiles::rows_vec4(C, tiles::vec4_aligned(dinp) && tiles::vec4_aligned(dout) &&
                                             tiles::vec4_aligned(inp) && tiles::vec4_aligned(weight));
    const int64_t blocks = (N + tiles::kRowsPerBlock - 1) / tiles::kRowsPerBlock;
    launch_kernel(layernorm_dinp_kernel<T>, static_cast<unsigned>(blocks), 32 * tiles::kRowsPerBlock, 0, stream, dinp,
                  dout, inp, weight, mean, rstd, N, C, vec);
    check_launch("layernorm_dinp_kernel");
  }
  if (dweight || dbias) {
    launch_kernel(dev::column_sum_kernel<2, LayerNormParamTerm<T>>, dev::column_sum_grid(C), dev::column_sum_block(), 0,
                  stream, dweight, dbias, N, C, LayerNormParamTerm<T>{dout, inp, mean, rstd, C});
    check_launch("column_sum_kernel (layernorm dweight/dbias)");
  }
}

}  // namespace

void launch_layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C) {
  launch_layernorm_backward_t(stream, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void launch_layernorm_backward(cudaStream_t stream, bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                               const bf16* inp, const float* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C) {
  launch_layernorm_backward_t(stream, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace hw::cuda

// LayerNorm forward, alone or fused with the residual add before it: one warp per row, row
// statistics in double and two passes (mean, then squared deviations) with a biased variance,
// as the CPU reference; the row is re-read from L1/L2 rather than held in registers, so any C
// works. Rows are float or bf16 (T); weight, bias, mean and rstd are float.
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

// kResidual: the row is first formed as resid = a + b and stored (resid may alias a or b:
// each lane reads its elements before writing them, and later passes read back only the
// elements the same lane wrote). The statistics use the stored (for bf16: rounded) values,
// so the fused op equals residual_forward then layernorm_forward. Otherwise the row is inp.
template <class T, bool kResidual>
__global__ void layernorm_kernel(T* out, float* mean, float* rstd, T* resid, const T* a, const T* b, const T* inp,
                                 const float* weight, const float* bias, int64_t N, int64_t C, double eps,
                                 bool vec) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * tiles::kRowsPerBlock + threadIdx.x / 32;
  if (n >= N) return;  // whole warps leave; the kernel has no block barrier
  const tiles::Vec4Split split = tiles::vec4_split(C, vec);
  const int64_t off = n * C;
  const T* x = kResidual ? resid + off : inp + off;

  double sum = 0.0;
  if constexpr (kResidual) {
    for (int64_t i = lane; i < split.vec_items; i += 32) {
      const float4 p = dev::load4(a + off, i), q = dev::load4(b + off, i);
      const float4 r = make_float4(dev::as_stored<T>(p.x + q.x), dev::as_stored<T>(p.y + q.y),
                                   dev::as_stored<T>(p.z + q.z), dev::as_stored<T>(p.w + q.w));
      dev::store4(resid + off, i, r);
      sum += static_cast<double>(r.x) + r.y + static_cast<double>(r.z) + r.w;
    }
    for (int64_t i = split.tail_begin + lane; i < C; i += 32) {
      const float r = dev::as_stored<T>(dev::load1(a, off + i) + dev::load1(b, off + i));
      dev::store1(resid, off + i, r);
      sum += r;
    }
  } else {
    for (int64_t i = lane; i < split.vec_items; i += 32) {
      const float4 p = dev::load4(x, i);
      sum += static_cast<double>(p.x) + p.y + static_cast<double>(p.z) + p.w;
    }
    for (int64_t i = split.tail_begin + lane; i < C; i += 32) sum += dev::load1(x, i);
  }
  const double m = dev::warp_sum(sum) / static_cast<double>(C);

  double sq = 0.0;
  for (int64_t i = lane; i < split.vec_items; i += 32) {
    const float4 p = dev::load4(x, i);
    const double d0 = p.x - m, d1 = p.y - m, d2 = p.z - m, d3 = p.w - m;
    sq += d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
  }
  for (int64_t i = split.tail_begin + lane; i < C; i += 32) {
    const double d = dev::load1(x, i) - m;
    sq += d * d;
  }
  const double rs = 1.0 / sqrt(dev::warp_sum(sq) / static_cast<double>(C) + eps);
  const float mf = static_cast<float>(m), rf = static_cast<float>(rs);

  T* y = out + off;
  for (int64_t i = lane; i < split.vec_items; i += 32) {
    const float4 p = dev::load4(x, i), w = dev::load4(weight, i), bb = dev::load4(bias, i);
    dev::store4(y, i,
                make_float4((p.x - mf) * rf * w.x + bb.x, (p.y - mf) * rf * w.y + bb.y, (p.z - mf) * rf * w.z + bb.z,
                            (p.w - mf) * rf * w.w + bb.w));
  }
  for (int64_t i = split.tail_begin + lane; i < C; i += 32)
    dev::store1(y, i, (dev::load1(x, i) - mf) * rf * weight[i] + bias[i]);
  if (lane == 0) {
    if (mean) mean[n] = mf;
    if (rstd) rstd[n] = rf;
  }
}

int64_t row_blocks(int64_t N) { return (N + tiles::kRowsPerBlock - 1) / tiles::kRowsPerBlock; }

template <class T>
void launch_layernorm_forward_t(cudaStream_t stream, T* out, float* mean, float* rstd, const T* inp,
                                const float* weight, const float* bias, int64_t N, int64_t C, double eps) {
  if (N <= 0 || C <= 0) return;
  const bool vec = tiles::rows_vec4(C, tiles::vec4_aligned(out) && tiles::vec4_aligned(inp) &&
                                           tiles::vec4_aligned(weight) && tiles::vec4_aligned(bias));
  launch_kernel(layernorm_kernel<T, false>, static_cast<unsigned>(row_blocks(N)), 32 * tiles::kRowsPerBlock, 0, stream,
                out, mean, rstd, nullptr, nullptr, nullptr, inp, weight, bias, N, C, eps, vec);
  check_launch("layernorm_kernel");
}

template <class T>
void launch_residual_layernorm_forward_t(cudaStream_t stream, T* resid_out, T* ln_out, float* mean, float* rstd,
                                         const T* a, const T* b, const float* weight, const float* bias, int64_t N,
                                         int64_t C, double eps) {
  if (N <= 0 || C <= 0) return;
  const bool vec = tiles::rows_vec4(C, tiles::vec4_aligned(resid_out) && tiles::vec4_aligned(ln_out) &&
                                           tiles::vec4_aligned(a) && tiles::vec4_aligned(b) &&
                                           tiles::vec4_aligned(weight) && tiles::vec4_aligned(bias));
  launch_kernel(layernorm_kernel<T, true>, static_cast<unsigned>(row_blocks(N)), 32 * tiles::kRowsPerBlock, 0, stream,
                ln_out, mean, rstd, resid_out, a, b, nullptr, weight, bias, N, C, eps, vec);
  check_launch("layernorm_kernel (residual)");
}

}  // namespace

void launch_layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C, double eps) {
  launch_layernorm_forward_t(stream, out, mean, rstd, inp, weight, bias, N, C, eps);
}

void launch_residual_layernorm_forward(cudaStream_t stream, float* resid_out, float* ln_out, float* mean,
                                       float* rstd, const float* a, const float* b, const float* weight,
                                       const float* bias, int64_t N, int64_t C, double eps) {
  launch_residual_layernorm_forward_t(stream, resid_out, ln_out, mean, rstd, a, b, weight, bias, N, C, eps);
}

void launch_layernorm_forward(cudaStream_t stream, bf16* out, float* mean, float* rstd, const bf16* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C, double eps) {
  launch_layernorm_forward_t(stream, out, mean, rstd, inp, weight, bias, N, C, eps);
}

void launch_residual_layernorm_forward(cudaStream_t stream, bf16* resid_out, bf16* ln_out, float* mean, float* rstd,
                                       const bf16* a, const bf16* b, const float* weight, const float* bias,
                                       int64_t N, int64_t C, double eps) {
  launch_residual_layernorm_forward_t(stream, resid_out, ln_out, mean, rstd, a, b, weight, bias, N, C, eps);
}

}  // namespace hw::cuda

// dbias[o] += sum over rows of dout[:, o]: matmul_backward's bias gradient, deterministic
// (double accumulation, fixed order; ops_column_sum.cuh).
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_column_sum.cuh"

namespace hw::cuda {

namespace {

struct RowValueTerm {
  const float* dout;
  int64_t O;
  __device__ void operator()(int64_t n, int64_t o, float (&t)[1]) const { t[0] = dout[n * O + o]; }
};

}  // namespace

void launch_bias_column_sum(cudaStream_t stream, float* dbias, const float* dout, int64_t N, int64_t O) {
  if (!dbias || N <= 0 || O <= 0) return;
  dev::column_sum_kernel<1><<<dev::column_sum_grid(O), dev::column_sum_block(), 0, stream>>>(
      dbias, nullptr, N, O, RowValueTerm{dout, O});
  check_launch("column_sum_kernel (bias)");
}

}  // namespace hw::cuda

// dbias[o] += sum over rows of dout[:, o]: matmul_backward's bias gradient, deterministic
// (double accumulation, fixed order; ops_column_sum.cuh). dout is float or bf16 (widened
// exactly); dbias is float.
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_column_sum.cuh"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

template <class T>
struct RowValueTerm {
  const T* dout;
  int64_t O;
  __device__ void operator()(int64_t n, int64_t o, float (&t)[1]) const { t[0] = dev::load1(dout, n * O + o); }
};

template <class T>
void launch_bias_column_sum_t(cudaStream_t stream, float* dbias, const T* dout, int64_t N, int64_t O) {
  if (!dbias || N <= 0 || O <= 0) return;
  launch_kernel(dev::column_sum_kernel<1, RowValueTerm<T>>, dev::column_sum_grid(O), dev::column_sum_block(), 0, stream,
                dbias, nullptr, N, O, RowValueTerm<T>{dout, O});
  check_launch("column_sum_kernel (bias)");
}

}  // namespace

void launch_bias_column_sum(cudaStream_t stream, float* dbias, const float* dout, int64_t N, int64_t O) {
  launch_bias_column_sum_t(stream, dbias, dout, N, O);
}

void launch_bias_column_sum(cudaStream_t stream, float* dbias, const bf16* dout, int64_t N, int64_t O) {
  launch_bias_column_sum_t(stream, dbias, dout, N, O);
}

}  // namespace hw::cuda

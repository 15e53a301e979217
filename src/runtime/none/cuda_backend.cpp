// The CUDA backend in a build without CUDA: asking for it (or for the GPU's GEMM rate) is a
// clear error.
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(std::string(what) + ": this headwise was built without CUDA (configure with -DHEADWISE_CUDA=ON)");
}
}  // namespace

std::unique_ptr<Backend<float>> make_cuda_backend(const CudaBackendOptions&) { no_cuda("the CUDA backend"); }

const Backend<float>& cuda_backend() { no_cuda("train.device = \"cuda\""); }

double measure_bf16_gemm_tflops(int) { no_cuda("the bf16 GEMM rate"); }

double measure_tf32_gemm_tflops(int) { no_cuda("the TF32 GEMM rate"); }

}  // namespace hw

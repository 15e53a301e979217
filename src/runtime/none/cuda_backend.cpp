// The CUDA backend in a build without CUDA: asking for it is a clear error.
#include "headwise/core/error.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw {

const Backend<float>& cuda_backend() {
  fail("train.device = \"cuda\": this headwise was built without CUDA (configure with -DHEADWISE_CUDA=ON)");
}

}  // namespace hw

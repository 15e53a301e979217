// Placeholder until the CUDA backend lands (issue 5).
#include "headwise/core/error.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw {

const Backend<float>& cuda_backend() { fail("the CUDA backend is not implemented yet"); }

}  // namespace hw

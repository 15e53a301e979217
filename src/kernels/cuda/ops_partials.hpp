#pragma once
// The last stage of the op reductions (reduce.cu, crossentropy.cu): one block adds `count`
// per-block partial sums in a fixed order and writes the total to *result (0 when count is 0).
#include <cuda_runtime.h>

#include <cstdint>

namespace hw::cuda {

void launch_partials_total(cudaStream_t stream, const double* partials, int64_t count, double* result);

}  // namespace hw::cuda

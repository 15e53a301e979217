#pragma once
// Turns a failing CUDA runtime or cuBLAS(Lt) status into one hw::Error line naming the call
// and the library's reason. Nothing in the CUDA backend aborts the process.
//   HW_CUDA_CHECK(cudaMemsetAsync(p, 0, n, s));
//   HW_CUBLAS_CHECK(cublasLtMatmul(...));
// The macros only add the call's own text to the message; the checks are plain functions.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "headwise/core/error.hpp"

namespace hw::cuda {

inline void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    fail(std::string("CUDA call failed: ") + call + ": " + cudaGetErrorName(status) + " (" +
         cudaGetErrorString(status) + ")");
}

inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(std::string("cuBLAS call failed: ") + call + ": " + cublasLtGetStatusName(status) + " (" +
         cublasLtGetStatusString(status) + ")");
}

// After a kernel launch: reports a bad launch configuration at once (the launch itself
// returns nothing); faults inside the kernel surface at the next synchronising call.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace hw::cuda

#define HW_CUDA_CHECK(call) ::hw::cuda::check_cuda((call), #call)
#define HW_CUBLAS_CHECK(call) ::hw::cuda::check_cublas((call), #call)

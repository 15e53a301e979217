#pragma once
// HW_HOST_DEVICE marks small index/tile functions that run both in CUDA kernels and in the
// CPU tests (tests/kernels), so that the kernels' indexing is tested without a GPU. This
// #if is the one build switch allowed in kernel-support headers.
#if defined(__CUDACC__)
#define HW_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HW_HOST_DEVICE inline
#endif

#pragma once
// Stand-in for <cublasLt.h> in the CPU block emulator: only what cuda_check.hpp and the GEMM
// description (RowMajorGemm, in the shim's kernels/cuda/gemm_lt.hpp) name. The emulator's GEMMs
// are plain loops (tests/emulated/emulated_gemm_lt.cpp), not cuBLASLt.
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
inline const char* cublasLtGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_EMULATED"; }
inline const char* cublasLtGetStatusString(cublasStatus_t) { return "emulated"; }
// The element types of library_types.h that the backend's GEMMs use (same values).
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };

#pragma once
// Stand-in for <cublasLt.h> in the CPU block emulator: only what cuda_check.hpp names (the
// emulator runs no GEMMs).
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
inline const char* cublasLtGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_EMULATED"; }
inline const char* cublasLtGetStatusString(cublasStatus_t) { return "emulated"; }

#pragma once
// Owning handles for cuBLASLt's objects (handle, matmul descriptor, matrix layout, heuristic
// preference), so an error thrown halfway through building a GEMM leaks nothing. Destroy
// errors are ignored: they can only come at teardown.
#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"

namespace hw::cuda {

template <class Handle, cublasStatus_t (*Destroy)(Handle)>
struct LtDeleter {
  void operator()(Handle h) const noexcept { (void)Destroy(h); }
};
template <class Handle, cublasStatus_t (*Destroy)(Handle)>
using LtOwned = std::unique_ptr<std::remove_pointer_t<Handle>, LtDeleter<Handle, Destroy>>;

using LtHandle = LtOwned<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = LtOwned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = LtOwned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = LtOwned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

inline LtHandle make_lt_handle() {
  cublasLtHandle_t h = nullptr;
  HW_CUBLAS_CHECK(cublasLtCreate(&h));
  return LtHandle(h);
}

// A matmul with fp32 alpha/beta and the given compute type.
inline LtMatmulDesc make_matmul_desc(cublasComputeType_t compute) {
  cublasLtMatmulDesc_t d = nullptr;
  HW_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, CUDA_R_32F));
  return LtMatmulDesc(d);
}

// A column-major rows x cols matrix with leading dimension ld.
inline LtLayout make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  HW_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  return LtLayout(l);
}

// Heuristic preferences allowing up to `workspace_bytes` of workspace.
inline LtPreference make_preference(size_t workspace_bytes) {
  cublasLtMatmulPreference_t p = nullptr;
  HW_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
  LtPreference owned(p);
  const uint64_t ws = workspace_bytes;
  HW_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  return owned;
}

template <class T>
void set_desc_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  HW_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref_attr(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  HW_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace hw::cuda

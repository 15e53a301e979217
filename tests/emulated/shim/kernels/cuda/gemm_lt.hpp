#pragma once
// The block emulator's GemmLt (shadows src/kernels/cuda/gemm_lt.hpp): the same public API, so
// the CUDA backend object (cuda_backend.cpp, cuda_bf16_ops.cpp) compiles and runs unchanged
// on the CPU. It stands in for cuBLASLt with plain loops (tests/emulated/emulated_gemm_lt.cpp):
// only cuBLASLt's semantics as gemm_lt.cpp uses them, none of its algorithms.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <tuple>

#include "headwise/core/bf16.hpp"

namespace hw::cuda {

enum class GemmPrecision : uint8_t {
  Fp32,  // exact fp32 products
  Tf32,  // inputs rounded to tf32 (10-bit mantissas), as CUBLAS_COMPUTE_32F_FAST_TF32
};

// One GEMM in row-major terms, exactly as in src/kernels/cuda/gemm_lt.hpp.
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  cudaDataType_t ab_type = CUDA_R_32F;
  cudaDataType_t cd_type = CUDA_R_32F;
  const void* A = nullptr;
  int64_t lda = 0;
  const void* B = nullptr;
  int64_t ldb = 0;
  void* D = nullptr;
  int64_t ldd = 0;
  float beta = 0.0f;
  const void* bias = nullptr;
  void* gelu_pre = nullptr;
};

class GemmLt {
 public:
  GemmLt(cudaStream_t stream, void* workspace, size_t workspace_bytes, GemmPrecision precision);
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int64_t N, int64_t I,
                      int64_t O, bool w_out_in) const;
  bool matmul_gelu_forward(float* pre, float* out, const float* inp, const float* w, const float* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const;
  void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, int64_t N,
                       int64_t I, int64_t O, bool w_out_in) const;

  void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I, int64_t O,
                      bool w_out_in) const;
  bool matmul_gelu_forward(bf16* pre, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const;
  void matmul_backward(bf16* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int64_t N, int64_t I,
                       int64_t O, bool w_out_in) const;

  void run(const RowMajorGemm& g, GemmPrecision precision) const;
  // Distinct GEMM configurations seen (the real one counts cuBLASLt plans by the same kind of key).
  size_t plan_count() const;

 private:
  // Returns false when "cuBLASLt" offers no algorithm (the real one's contract; gemm_layers.cpp
  // calls it for the GELU epilogue).
  bool try_run(const RowMajorGemm& g, GemmPrecision precision) const;

  using ShapeKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, bool,
                              bool>;
  GemmPrecision precision_;
  mutable std::mutex mutex_;
  mutable std::set<ShapeKey> shapes_;
};

}  // namespace hw::cuda

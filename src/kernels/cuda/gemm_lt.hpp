#pragma once
// The CUDA backend's dense layers on cuBLASLt, with the Backend's semantics (kernels/cpu.hpp):
// forward overwrites, backward accumulates, any gradient may be null, W is [I,O] (Conv1D) or
// [O,I] (w_out_in). The bias gradient is not a GEMM (see gemm_lt.cpp): the backend adds it.
// Each layer comes in fp32 (precision per GemmLt: exact or TF32) and in mixed precision (bf16
// data, fp32 accumulation, fp32 weight gradients). Matmul descriptors, layouts and the chosen
// algorithm are built once per GEMM shape and data types (first step) and reused; a call only
// sets pointers and enqueues on the stream.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "headwise/core/bf16.hpp"
#include "kernels/cuda/cublaslt_objects.hpp"

namespace hw::cuda {

enum class GemmPrecision : uint8_t {
  Fp32,  // CUBLAS_COMPUTE_32F: the exact fp32 products the parity tests compare against
  Tf32,  // CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores, inputs rounded to 10-bit mantissas
};

// One GEMM in row-major terms: D[M,N] = op(A)[M,K] @ op(B)[K,N] (+ bias[N] broadcast over
// rows) (+ beta * D). op(A) = A^T when trans_a (A stored [K,M]), else A (stored [M,K]).
// With gelu_pre set, D receives gelu(result) and gelu_pre the result itself (same ld as D).
// A and B hold ab_type elements; D, the bias and gelu_pre hold cd_type elements (cuBLASLt's
// default bias and GELU aux types are D's). Supported pairs (cublasLtMatmul, compute 32F,
// fp32 scale): fp32/fp32, bf16/bf16 and bf16/fp32; TF32 needs fp32/fp32.
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
  float beta = 0.0f;  // 0: overwrite D (not read); 1: accumulate into D (computed in fp32, rounded once)
  const void* bias = nullptr;
  void* gelu_pre = nullptr;
};

class GemmLt {
 public:
  // `workspace` (256-byte aligned, `workspace_bytes`) is cuBLASLt's scratch, owned by the
  // caller and outliving this object; all work is enqueued on `stream`. `precision` applies
  // to the fp32 matmul_* calls (the bf16 ones always compute in CUBLAS_COMPUTE_32F).
  GemmLt(cudaStream_t stream, void* workspace, size_t workspace_bytes, GemmPrecision precision);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int64_t N, int64_t I,
                      int64_t O, bool w_out_in) const;
  // pre = inp @ W + bias, out = gelu(pre) in one GEMM (cuBLASLt's GELU_AUX epilogue). Returns
  // false, having done nothing, when the epilogue cannot be used for this shape (it needs
  // O % 8 == 0, and cuBLASLt may offer no algorithm): the caller then composes the ops.
  bool matmul_gelu_forward(float* pre, float* out, const float* inp, const float* w, const float* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const;
  // dinp += dout @ W^T and dW += inp^T @ dout (either may be null); no bias gradient.
  void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, int64_t N,
                       int64_t I, int64_t O, bool w_out_in) const;

  // Mixed precision: the same three layers with bf16 data, fp32 accumulation (always
  // CUBLAS_COMPUTE_32F: bf16 inputs already run on tensor cores) and each bf16 output rounded
  // once. The bias and the GELU aux (pre) are bf16. In matmul_backward dinp accumulates in
  // bf16 (read, add in fp32, round) and dw, the parameter gradient, accumulates in fp32.
  void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I, int64_t O,
                      bool w_out_in) const;
  bool matmul_gelu_forward(bf16* pre, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const;
  void matmul_backward(bf16* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int64_t N, int64_t I,
                       int64_t O, bool w_out_in) const;

  // One GEMM; throws hw::Error naming the shape when cuBLASLt has no algorithm for it.
  void run(const RowMajorGemm& g, GemmPrecision precision) const;
  // Number of distinct GEMM plans built so far (tests: reuse, not rebuild).
  size_t plan_count() const;

  // What makes two GEMMs share a plan: cuBLASLt's (column-major) operation, the epilogue, the
  // precision, the data types, and the pointer alignments the algorithm was chosen for (a
  // pointer into the middle of a tensor may be less aligned than an arena slice).
  struct PlanKey {
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    uint32_t epilogue = 0;
    GemmPrecision precision = GemmPrecision::Fp32;
    cudaDataType_t ab_type = CUDA_R_32F, cd_type = CUDA_R_32F;
    uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;
    auto operator<=>(const PlanKey&) const = default;
  };
  struct Plan;

 private:
  // Returns false when cuBLASLt offers no algorithm (nothing is enqueued then).
  bool try_run(const RowMajorGemm& g, GemmPrecision precision) const;
  const Plan& plan_for(const PlanKey& key, const RowMajorGemm& g) const;

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  GemmPrecision precision_;
  LtHandle handle_;
  mutable std::mutex mutex_;
  mutable std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace hw::cuda

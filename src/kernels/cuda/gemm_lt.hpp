#pragma once
// The CUDA backend's dense layers on cuBLASLt, with the Backend's semantics (kernels/cpu.hpp):
// forward overwrites, backward accumulates, any gradient may be null, W is [I,O] (Conv1D) or
// [O,I] (w_out_in). The bias gradient is not a GEMM (see gemm_lt.cpp): the backend adds it. Matmul descriptors, layouts and the chosen algorithm are built once per
// GEMM shape (first step) and reused; a call only sets pointers and enqueues on the stream.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/cublaslt_objects.hpp"

namespace hw::cuda {

enum class GemmPrecision : uint8_t {
  Fp32,  // CUBLAS_COMPUTE_32F: the exact fp32 products the parity tests compare against
  Tf32,  // CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores, inputs rounded to 10-bit mantissas
};

// One GEMM in row-major terms: D[M,N] = op(A)[M,K] @ op(B)[K,N] (+ bias[N] broadcast over
// rows) (+ beta * D). op(A) = A^T when trans_a (A stored [K,M]), else A (stored [M,K]).
// With gelu_pre set, D receives gelu(result) and gelu_pre the result itself (same ld as D).
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  const float* A = nullptr;
  int64_t lda = 0;
  const float* B = nullptr;
  int64_t ldb = 0;
  float* D = nullptr;
  int64_t ldd = 0;
  float beta = 0.0f;  // 0: overwrite D (not read); 1: accumulate into D
  const float* bias = nullptr;
  float* gelu_pre = nullptr;
};

class GemmLt {
 public:
  // `workspace` (256-byte aligned, `workspace_bytes`) is cuBLASLt's scratch, owned by the
  // caller and outliving this object; all work is enqueued on `stream`. `precision` applies
  // to the matmul_* calls.
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

  // One GEMM; throws hw::Error naming the shape when cuBLASLt has no algorithm for it.
  void run(const RowMajorGemm& g, GemmPrecision precision) const;
  // Number of distinct GEMM plans built so far (tests: reuse, not rebuild).
  size_t plan_count() const;

  // What makes two GEMMs share a plan: cuBLASLt's (column-major) operation, the epilogue, the
  // precision, and the pointer alignments the algorithm was chosen for (a pointer into the
  // middle of a tensor may be less aligned than an arena slice).
  struct PlanKey {
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    uint32_t epilogue = 0;
    GemmPrecision precision = GemmPrecision::Fp32;
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

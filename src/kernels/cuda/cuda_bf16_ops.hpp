#pragma once
// The CUDA backend's mixed-precision step (ComputeOps<bf16, float>, what Backend::bf16_ops
// returns): bf16 activations and weight copies, fp32 statistics and parameter gradients. It
// owns nothing: every op is enqueued on the backend's stream, the GEMMs go through the
// backend's GemmLt (bf16 overloads) and the loss sum through its reduction scratch, so the
// object lives inside the CudaBackend and dies with it.
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/compute_ops.hpp"
#include "kernels/cuda/gemm_lt.hpp"
#include "kernels/cuda/launch_ops.hpp"

namespace hw::cuda {

// Step helpers the fp32 backend and these ops share.
// The reduction's double, copied back once `stream` reaches it (this waits for the work
// enqueued so far: one of the step's two host syncs).
double read_reduction_result(cudaStream_t stream, const ReductionScratch& scratch);
// The CPU reference's rope argument checks (kernels/cpu/rope.cpp), with its messages.
void check_rope_args(int64_t hd, double theta);

class CudaBf16Ops final : public ComputeOps<bf16, float> {
 public:
  // `gemm` and the memory behind `reduce` belong to the backend and outlive this object.
  // `gelu_epilogue`: matmul_gelu_forward as one GEMM with cuBLASLt's GELU_AUX epilogue
  // (CudaBackendOptions::gelu_epilogue), else a GEMM then the GELU kernel.
  CudaBf16Ops(cudaStream_t stream, const GemmLt& gemm, const ReductionScratch& reduce, bool gelu_epilogue);

  void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I, int64_t O,
                      bool w_out_in) const override;
  void matmul_backward(bf16* dinp, float* dw, float* dbias, const bf16* dout, const bf16* inp, const bf16* w,
                       int64_t N, int64_t I, int64_t O, bool w_out_in) const override;
  void matmul_gelu_forward(bf16* pre, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const override;
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, double eps) const override;
  void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                          const float* weight, const float* mean, const float* rstd, int64_t N,
                          int64_t C) const override;
  void residual_layernorm_forward(bf16* resid_out, bf16* ln_out, float* mean, float* rstd, const bf16* a,
                                  const bf16* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                  double eps) const override;
  void gelu_forward(bf16* out, const bf16* inp, int64_t n) const override;
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) const override;
  void encoder_forward(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int64_t B, int64_t T,
                       int64_t C) const override;
  void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) const override;
  void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t n) const override;
  void accumulate(bf16* dst, const bf16* src, int64_t n) const override;
  double crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits, const int32_t* targets,
                                       int64_t N, int64_t V, double dloss) const override;
  void rope_forward(bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                    double theta) const override;
  void rope_backward(bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                     double theta) const override;
  void fill_zero(bf16* x, int64_t n) const override;

  void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                         const attn::LayerHeadParams<float>& params, const bf16* qkv, bf16* out, float* row_stats,
                         float* workspace) const override;
  void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                          const attn::LayerHeadParams<float>& params, const bf16* qkv, const bf16* out,
                          const float* row_stats, const bf16* dout, bf16* dqkv, float* workspace) const override;
  int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) const override;

  void round_weights(bf16* dst, const float* src, int64_t n) const override;

 private:
  cudaStream_t stream_;
  const GemmLt& gemm_;
  ReductionScratch reduce_;
  bool gelu_epilogue_;
};

}  // namespace hw::cuda

// The mixed-precision step on the CUDA backend: each op forwards to its bf16 launcher
// (launch_ops.hpp, attention_launch.hpp) or bf16 GEMM (gemm_lt.hpp) on the backend's stream.
#include "kernels/cuda/cuda_bf16_ops.hpp"

#include <string>

#include "headwise/core/error.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace hw::cuda {

double read_reduction_result(cudaStream_t stream, const ReductionScratch& scratch) {
  double value = 0.0;
  HW_CUDA_CHECK(cudaMemcpyAsync(&value, scratch.result, sizeof(value), cudaMemcpyDeviceToHost, stream));
  HW_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

void check_rope_args(int64_t hd, double theta) {
  check(hd > 0 && hd % 2 == 0, "rope: head width hd=" + std::to_string(hd) + " must be positive and even");
  check(theta > 0.0, "rope: theta=" + std::to_string(theta) + " must be positive");
}

CudaBf16Ops::CudaBf16Ops(cudaStream_t stream, const GemmLt& gemm, const ReductionScratch& reduce, bool gelu_epilogue)
    : stream_(stream), gemm_(gemm), reduce_(reduce), gelu_epilogue_(gelu_epilogue) {}

void CudaBf16Ops::matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I,
                                 int64_t O, bool w_out_in) const {
  gemm_.matmul_forward(out, inp, w, bias, N, I, O, w_out_in);
}

void CudaBf16Ops::matmul_backward(bf16* dinp, float* dw, float* dbias, const bf16* dout, const bf16* inp,
                                  const bf16* w, int64_t N, int64_t I, int64_t O, bool w_out_in) const {
  gemm_.matmul_backward(dinp, dw, dout, inp, w, N, I, O, w_out_in);
  // cuBLASLt's bias-gradient epilogues store rather than accumulate (see gemm_lt.cpp).
  if (dbias && N > 0 && O > 0) launch_bias_column_sum(stream_, dbias, dout, N, O);
}

void CudaBf16Ops::matmul_gelu_forward(bf16* pre, bf16* out, const bf16* inp, const bf16* w, const bf16* bias,
                                      int64_t N, int64_t I, int64_t O, bool w_out_in) const {
  if (gelu_epilogue_ && gemm_.matmul_gelu_forward(pre, out, inp, w, bias, N, I, O, w_out_in)) return;
  gemm_.matmul_forward(pre, inp, w, bias, N, I, O, w_out_in);
  launch_gelu_forward(stream_, out, pre, N * O);
}

void CudaBf16Ops::layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight,
                                    const float* bias, int64_t N, int64_t C, double eps) const {
  launch_layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, N, C, eps);
}

void CudaBf16Ops::layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                     const float* weight, const float* mean, const float* rstd, int64_t N,
                                     int64_t C) const {
  launch_layernorm_backward(stream_, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void CudaBf16Ops::residual_layernorm_forward(bf16* resid_out, bf16* ln_out, float* mean, float* rstd, const bf16* a,
                                             const bf16* b, const float* weight, const float* bias, int64_t N,
                                             int64_t C, double eps) const {
  launch_residual_layernorm_forward(stream_, resid_out, ln_out, mean, rstd, a, b, weight, bias, N, C, eps);
}

void CudaBf16Ops::gelu_forward(bf16* out, const bf16* inp, int64_t n) const {
  launch_gelu_forward(stream_, out, inp, n);
}

void CudaBf16Ops::gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) const {
  launch_gelu_backward(stream_, dinp, inp, dout, n);
}

void CudaBf16Ops::encoder_forward(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int64_t B,
                                  int64_t T, int64_t C) const {
  launch_encoder_forward(stream_, out, tokens, wte, wpe, B, T, C);
}

void CudaBf16Ops::encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, int64_t B,
                                   int64_t T, int64_t C) const {
  launch_encoder_backward(stream_, dwte, dwpe, dout, tokens, B, T, C);
}

void CudaBf16Ops::residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t n) const {
  launch_residual_forward(stream_, out, a, b, n);
}

void CudaBf16Ops::accumulate(bf16* dst, const bf16* src, int64_t n) const { launch_accumulate(stream_, dst, src, n); }

double CudaBf16Ops::crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits,
                                                  const int32_t* targets, int64_t N, int64_t V, double dloss) const {
  launch_crossentropy_forward_backward(stream_, losses, dlogits, logits, targets, N, V, dloss, reduce_);
  return read_reduction_result(stream_, reduce_);
}

void CudaBf16Ops::rope_forward(bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                               int64_t hd, double theta) const {
  check_rope_args(hd, theta);
  launch_rope_forward(stream_, x, B, T, row_stride, col0, n_heads, hd, theta);
}

void CudaBf16Ops::rope_backward(bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                                int64_t hd, double theta) const {
  check_rope_args(hd, theta);
  launch_rope_backward(stream_, dx, B, T, row_stride, col0, n_heads, hd, theta);
}

void CudaBf16Ops::fill_zero(bf16* x, int64_t n) const { launch_fill_zero(stream_, x, n); }

void CudaBf16Ops::attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                    const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                                    const bf16* qkv, bf16* out, float* row_stats, float* workspace) const {
  launch_attention_forward(stream_, plan, layout, dims, params, qkv, out, row_stats, workspace);
}

void CudaBf16Ops::attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                     const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                                     const bf16* qkv, const bf16* out, const float* row_stats, const bf16* dout,
                                     bf16* dqkv, float* workspace) const {
  launch_attention_backward(stream_, plan, layout, dims, params, qkv, out, row_stats, dout, dqkv, workspace);
}

// The workspace is F (fp32) in both precisions, so its size is the fp32 attention's.
int64_t CudaBf16Ops::attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                              const attn::AttnDims& dims) const {
  return attention_workspace_floats(plan, layout, dims);
}

void CudaBf16Ops::round_weights(bf16* dst, const float* src, int64_t n) const {
  launch_round_to_bf16(stream_, dst, src, n);
}

}  // namespace hw::cuda

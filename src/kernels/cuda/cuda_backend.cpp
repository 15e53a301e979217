// The CUDA backend: every Backend op enqueued on one non-blocking stream of the current GPU.
// GEMMs go through cuBLASLt (gemm_lt), attention through the attention launchers, the rest
// through the element/row/reduction launchers (launch_ops.hpp). All scratch (cuBLASLt
// workspace, reduction partials) lives in the "cuda.scratch" arena allocated here, so no op
// allocates. The only host waits inside a step are the two ops that return a double
// (cross-entropy's loss sum and sum_squares for gradient clipping). The mixed-precision ops
// (bf16_ops, cuda_bf16_ops.hpp) share this stream, GemmLt and scratch.
#include <nvtx3/nvToolsExt.h>

#include <memory>
#include <string>

#include "headwise/core/arena.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/cuda_backend.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/cuda_bf16_ops.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_stream.hpp"
#include "kernels/cuda/gemm_lt.hpp"
#include "kernels/cuda/launch_ops.hpp"

namespace hw {

namespace {

constexpr int64_t kLtWorkspaceBytes = int64_t(32) << 20;  // cuBLASLt's split-K / stream-K scratch

class CudaBackend final : public Backend<float>, public cuda::StreamOwner {
 public:
  explicit CudaBackend(const CudaBackendOptions& opts) : opts_(opts), scratch_("cuda.scratch", Device::CUDA) {
    Tensor* lt_workspace = scratch_.declare("cublaslt.workspace", {kLtWorkspaceBytes / 4}, DType::F32);
    Tensor* partials = scratch_.declare("reduction.partials", {cuda::kReductionPartials}, DType::F64);
    Tensor* result = scratch_.declare("reduction.result", {1}, DType::F64);
    scratch_.allocate();
    // The arena zeroes its block on the legacy default stream, which this non-blocking stream
    // does not wait for: finish that before any op can touch the scratch.
    HW_CUDA_CHECK(cudaDeviceSynchronize());
    reduce_ = {partials->as<double>(), result->as<double>()};
    gemm_ = std::make_unique<cuda::GemmLt>(stream(), lt_workspace->data, lt_workspace->nbytes(),
                                           opts_.tf32 ? cuda::GemmPrecision::Tf32 : cuda::GemmPrecision::Fp32);
    bf16_ops_ = std::make_unique<cuda::CudaBf16Ops>(stream(), *gemm_, reduce_, opts_.gelu_epilogue);
  }

  // Ops may still be running on the stream: let them finish before their scratch is freed.
  ~CudaBackend() override { (void)cudaStreamSynchronize(stream_.get()); }

  Device device() const override { return Device::CUDA; }
  const char* name() const override { return opts_.tf32 ? "cuda-tf32" : "cuda-fp32"; }
  cudaStream_t stream() const override { return stream_.get(); }
  void* native_stream() const override { return stream_.get(); }
  const ComputeOps<bf16, float>* bf16_ops() const override { return bf16_ops_.get(); }

  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int64_t N, int64_t I,
                      int64_t O, bool w_out_in) const override {
    gemm_->matmul_forward(out, inp, w, bias, N, I, O, w_out_in);
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                       int64_t N, int64_t I, int64_t O, bool w_out_in) const override {
    gemm_->matmul_backward(dinp, dw, dout, inp, w, N, I, O, w_out_in);
    if (dbias && N > 0 && O > 0) cuda::launch_bias_column_sum(stream(), dbias, dout, N, O);
  }
  void matmul_gelu_forward(float* pre, float* out, const float* inp, const float* w, const float* bias, int64_t N,
                           int64_t I, int64_t O, bool w_out_in) const override {
    if (opts_.gelu_epilogue && gemm_->matmul_gelu_forward(pre, out, inp, w, bias, N, I, O, w_out_in)) return;
    gemm_->matmul_forward(pre, inp, w, bias, N, I, O, w_out_in);
    cuda::launch_gelu_forward(stream(), out, pre, N * O);
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, double eps) const override {
    cuda::launch_layernorm_forward(stream(), out, mean, rstd, inp, weight, bias, N, C, eps);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int64_t N,
                          int64_t C) const override {
    cuda::launch_layernorm_backward(stream(), dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void residual_layernorm_forward(float* resid_out, float* ln_out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                  double eps) const override {
    cuda::launch_residual_layernorm_forward(stream(), resid_out, ln_out, mean, rstd, a, b, weight, bias, N, C, eps);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) const override {
    cuda::launch_gelu_forward(stream(), out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) const override {
    cuda::launch_gelu_backward(stream(), dinp, inp, dout, n);
  }
  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) const override {
    cuda::launch_encoder_forward(stream(), out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) const override {
    cuda::launch_encoder_backward(stream(), dwte, dwpe, dout, tokens, B, T, C);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) const override {
    cuda::launch_residual_forward(stream(), out, a, b, n);
  }
  void accumulate(float* dst, const float* src, int64_t n) const override {
    cuda::launch_accumulate(stream(), dst, src, n);
  }
  double crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                                       int64_t N, int64_t V, double dloss) const override {
    cuda::launch_crossentropy_forward_backward(stream(), losses, dlogits, logits, targets, N, V, dloss, reduce_);
    return read_result();
  }
  void rope_forward(float* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                    double theta) const override {
    cuda::check_rope_args(hd, theta);
    cuda::launch_rope_forward(stream(), x, B, T, row_stride, col0, n_heads, hd, theta);
  }
  void rope_backward(float* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                     double theta) const override {
    cuda::check_rope_args(hd, theta);
    cuda::launch_rope_backward(stream(), dx, B, T, row_stride, col0, n_heads, hd, theta);
  }
  double sum_squares(const float* x, int64_t n) const override {
    cuda::launch_sum_squares(stream(), x, n, reduce_);
    return read_result();
  }
  void scale(float* x, float s, int64_t n) const override { cuda::launch_scale(stream(), x, s, n); }
  void fill_zero(float* x, int64_t n) const override { cuda::launch_fill_zero(stream(), x, n); }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) const override {
    cuda::launch_adamw_update(stream(), p, g, m, v, n, s);
  }

  // cudaMemcpyDefault: the direction follows from the pointers (unified addressing), so a
  // caller passing device memory on both sides is served too.
  void copy_to_device(void* dst, const void* host_src, size_t bytes) const override {
    if (bytes == 0) return;
    HW_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyDefault, stream()));
    stream_.synchronize();
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) const override {
    if (bytes == 0) return;
    HW_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDefault, stream()));
    stream_.synchronize();
  }
  void synchronize() const override { stream_.synchronize(); }
  void range_push(const char* name) const override { nvtxRangePushA(name); }
  void range_pop() const override { nvtxRangePop(); }

  void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                         const attn::LayerHeadParams<float>& params, const float* qkv, float* out, float* row_stats,
                         float* workspace) const override {
    cuda::launch_attention_forward(stream(), plan, layout, dims, params, qkv, out, row_stats, workspace);
  }
  void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                          const attn::LayerHeadParams<float>& params, const float* qkv, const float* out,
                          const float* row_stats, const float* dout, float* dqkv, float* workspace) const override {
    cuda::launch_attention_backward(stream(), plan, layout, dims, params, qkv, out, row_stats, dout, dqkv,
                                    workspace);
  }
  int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) const override {
    return cuda::attention_workspace_floats(plan, layout, dims);
  }

 private:
  double read_result() const { return cuda::read_reduction_result(stream(), reduce_); }

  CudaBackendOptions opts_;
  cuda::Stream stream_;
  Arena scratch_;
  cuda::ReductionScratch reduce_{};
  std::unique_ptr<cuda::GemmLt> gemm_;
  std::unique_ptr<cuda::CudaBf16Ops> bf16_ops_;  // uses gemm_: declared after it, destroyed before it
};

}  // namespace

std::unique_ptr<Backend<float>> make_cuda_backend(const CudaBackendOptions& opts) {
  check(device::available(), "the CUDA backend needs a GPU: " + device::describe());
  return std::make_unique<CudaBackend>(opts);
}

const Backend<float>& cuda_backend() {
  // A failed creation throws out of the initialiser and is retried on the next call.
  static const std::unique_ptr<Backend<float>> backend = make_cuda_backend();
  return *backend;
}

}  // namespace hw

#pragma once
// The op interface the model, optimizer and methods are written against. A backend owns no
// state the model needs; pointers are in the backend's device memory. The CPU backend is
// the numerical reference (float for training, double for tests); a CUDA backend implements
// the same interface and is parity-tested op by op against it. Semantics of every op are
// documented in kernels/cpu.hpp and attention/attention.hpp.
#include <cstddef>
#include <cstdint>

#include "headwise/attention/attention.hpp"
#include "headwise/core/tensor.hpp"
#include "headwise/kernels/adamw_step.hpp"

namespace hw {

template <class F>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;

  virtual void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t I, int64_t O,
                              bool w_out_in = false) const = 0;
  virtual void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N,
                               int64_t I, int64_t O, bool w_out_in = false) const = 0;
  virtual void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int64_t N,
                                 int64_t C, double eps) const = 0;
  virtual void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                                  const F* mean, const F* rstd, int64_t N, int64_t C) const = 0;
  virtual void gelu_forward(F* out, const F* inp, int64_t n) const = 0;
  virtual void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t n) const = 0;
  virtual void encoder_forward(F* out, const int32_t* tokens, const F* wte, const F* wpe, int64_t B, int64_t T,
                               int64_t C) const = 0;
  virtual void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* tokens, int64_t B, int64_t T,
                                int64_t C) const = 0;
  virtual void residual_forward(F* out, const F* a, const F* b, int64_t n) const = 0;
  virtual void accumulate(F* dst, const F* src, int64_t n) const = 0;
  virtual double crossentropy_forward_backward(F* losses, F* dlogits, const F* logits, const int32_t* targets,
                                               int64_t N, int64_t V, double dloss) const = 0;
  virtual void rope_forward(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                            double theta) const = 0;
  virtual void rope_backward(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                             int64_t hd, double theta) const = 0;
  virtual double sum_squares(const F* x, int64_t n) const = 0;
  virtual void scale(F* x, F s, int64_t n) const = 0;
  virtual void fill_zero(F* x, int64_t n) const = 0;
  // n consecutive elements of one AdamW update (parameters, gradients and moments share n).
  virtual void adamw_update(F* p, const F* g, F* m, F* v, int64_t n, const AdamWStep& s) const = 0;

  // Memory of this backend's device <-> host memory. Both return when the copy is complete
  // (the CPU backend: memcpy). Used outside the step: init, checkpoints, plan changes, and
  // the few scalars a step reads back.
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) const = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) const = 0;
  // Wait until every op issued so far has finished (the CPU backend is synchronous).
  virtual void synchronize() const {}
  // The CUDA stream (cudaStream_t) every op is enqueued on, or nullptr for a synchronous
  // backend: a GPU communicator orders its collectives after this stream's work (Comm::bind_stream).
  virtual void* native_stream() const { return nullptr; }
  // Named phase markers for profilers (NVTX on CUDA); ranges nest. No-ops on the CPU.
  virtual void range_push(const char* /*name*/) const {}
  virtual void range_pop() const {}

  // Fused ops a backend may implement in one pass; the defaults compose the plain ops, so
  // the CPU reference defines their meaning.
  // pre = inp @ W (+ bias) (saved for backward), out = gelu(pre).
  virtual void matmul_gelu_forward(F* pre, F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t I,
                                   int64_t O, bool w_out_in = false) const {
    matmul_forward(pre, inp, w, bias, N, I, O, w_out_in);
    gelu_forward(out, pre, N * O);
  }
  // resid_out = a + b, then ln_out = LayerNorm(resid_out) with its mean/rstd.
  virtual void residual_layernorm_forward(F* resid_out, F* ln_out, F* mean, F* rstd, const F* a, const F* b,
                                          const F* weight, const F* bias, int64_t N, int64_t C, double eps) const {
    residual_forward(resid_out, a, b, N * C);
    layernorm_forward(ln_out, mean, rstd, resid_out, weight, bias, N, C, eps);
  }

  virtual void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                 const attn::AttnDims& dims, const attn::LayerHeadParams<F>& params, const F* qkv,
                                 F* out, F* row_stats, F* workspace) const = 0;
  virtual void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                  const attn::AttnDims& dims, const attn::LayerHeadParams<F>& params, const F* qkv,
                                  const F* out, const F* row_stats, const F* dout, F* dqkv, F* workspace) const = 0;
  virtual int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                           const attn::AttnDims& dims) const = 0;
};

// The CPU reference backend (a process-wide stateless object).
template <class F>
const Backend<F>& cpu_backend();

// The training backend for a device: the CPU backend, or the CUDA backend of this process's
// current GPU. Throws hw::Error naming the reason when CUDA was not built or no GPU is visible.
const Backend<float>& backend_for(Device device);

}  // namespace hw

#pragma once
// The ops of one training step, written against two storage types:
//   A: activations and the GEMMs' copy of the weights (wte, wpe, every matmul weight and bias);
//   F: parameter gradients, LayerNorm weights, head parameters, row statistics (LayerNorm
//      mean/rstd, attention row stats, per-row losses) and the attention workspace.
// A full-precision backend is ComputeOps<F, F> (Backend<F> derives from it, below); a mixed-
// precision step uses ComputeOps<bf16, float>: bf16 storage, fp32 arithmetic, fp32 gradients.
// Semantics of every op are those of the CPU reference (kernels/cpu.hpp, attention/attention.hpp);
// an op whose output is A computes in fp32 (or F) and rounds once when it stores.
#include <cstdint>
#include <string>

#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"

namespace hw {

template <class A, class F>
class ComputeOps {
 public:
  virtual ~ComputeOps() = default;

  virtual void matmul_forward(A* out, const A* inp, const A* w, const A* bias, int64_t N, int64_t I, int64_t O,
                              bool w_out_in = false) const = 0;
  virtual void matmul_backward(A* dinp, F* dw, F* dbias, const A* dout, const A* inp, const A* w, int64_t N,
                               int64_t I, int64_t O, bool w_out_in = false) const = 0;
  virtual void layernorm_forward(A* out, F* mean, F* rstd, const A* inp, const F* weight, const F* bias, int64_t N,
                                 int64_t C, double eps) const = 0;
  virtual void layernorm_backward(A* dinp, F* dweight, F* dbias, const A* dout, const A* inp, const F* weight,
                                  const F* mean, const F* rstd, int64_t N, int64_t C) const = 0;
  virtual void gelu_forward(A* out, const A* inp, int64_t n) const = 0;
  virtual void gelu_backward(A* dinp, const A* inp, const A* dout, int64_t n) const = 0;
  virtual void encoder_forward(A* out, const int32_t* tokens, const A* wte, const A* wpe, int64_t B, int64_t T,
                               int64_t C) const = 0;
  virtual void encoder_backward(F* dwte, F* dwpe, const A* dout, const int32_t* tokens, int64_t B, int64_t T,
                                int64_t C) const = 0;
  virtual void residual_forward(A* out, const A* a, const A* b, int64_t n) const = 0;
  virtual void accumulate(A* dst, const A* src, int64_t n) const = 0;
  virtual double crossentropy_forward_backward(F* losses, A* dlogits, const A* logits, const int32_t* targets,
                                               int64_t N, int64_t V, double dloss) const = 0;
  virtual void rope_forward(A* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                            double theta) const = 0;
  virtual void rope_backward(A* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                             int64_t hd, double theta) const = 0;
  virtual void fill_zero(A* x, int64_t n) const = 0;

  // Fused ops a backend may implement in one pass; the defaults compose the plain ops, so
  // the CPU reference defines their meaning.
  // pre = inp @ W (+ bias) (saved for backward), out = gelu(pre).
  virtual void matmul_gelu_forward(A* pre, A* out, const A* inp, const A* w, const A* bias, int64_t N, int64_t I,
                                   int64_t O, bool w_out_in = false) const {
    matmul_forward(pre, inp, w, bias, N, I, O, w_out_in);
    gelu_forward(out, pre, N * O);
  }
  // dinp = dout * gelu'(inp) over N rows of O (OVERWRITES dinp, unlike gelu_backward), then
  // dbias[O] += the column sums of that dinp (the bias gradient of the GEMM that made inp; dbias
  // may be null). One pass instead of zero-fill, accumulate and a bias-gradient pass.
  virtual void gelu_backward_bias(A* dinp, F* dbias, const A* inp, const A* dout, int64_t N, int64_t O) const {
    fill_zero(dinp, N * O);
    gelu_backward(dinp, inp, dout, N * O);
    if (dbias) matmul_backward(nullptr, nullptr, dbias, dinp, nullptr, nullptr, N, 0, O);
  }
  // resid_out = a + b, then ln_out = LayerNorm(resid_out) with its mean/rstd.
  virtual void residual_layernorm_forward(A* resid_out, A* ln_out, F* mean, F* rstd, const A* a, const A* b,
                                          const F* weight, const F* bias, int64_t N, int64_t C, double eps) const {
    residual_forward(resid_out, a, b, N * C);
    layernorm_forward(ln_out, mean, rstd, resid_out, weight, bias, N, C, eps);
  }

  // LoRA adapters' ops (cpu.hpp defines them). A backend without them keeps these defaults, which
  // throw naming the op; the model refuses adapters on such a backend before any step.
  virtual void add_columns(A* /*dst*/, int64_t /*stride*/, int64_t /*col0*/, const A* /*src*/, int64_t /*N*/,
                           int64_t /*width*/) const {
    missing_op("add_columns");
  }
  virtual void copy_columns(A* /*dst*/, const A* /*src*/, int64_t /*stride*/, int64_t /*col0*/, int64_t /*N*/,
                            int64_t /*width*/) const {
    missing_op("copy_columns");
  }
  // Inverted dropout (cpu::dropout: the mask is a pure function of seed and element index; out
  // may be in). LoRA's adapter inputs and the model's dropout (model.resid_pdrop, embd_pdrop) use it.
  virtual void dropout(A* /*out*/, const A* /*in*/, int64_t /*n*/, double /*p*/, uint64_t /*seed*/) const {
    missing_op("dropout");
  }
  // Whether dropout above is implemented (the model refuses dropout rates before any step otherwise).
  virtual bool has_dropout_op() const { return false; }
  // Whether the LoRA ops above are implemented.
  virtual bool has_lora_ops() const { return false; }

  // Llama-family ops (cpu.hpp defines them: RMSNorm, SwiGLU, rotary frequencies from a table).
  // A backend without them keeps these defaults, which throw naming the op; the model refuses a
  // Llama-family config on such a backend before any step (has_llama_ops).
  virtual void rmsnorm_forward(A* /*out*/, int64_t /*out_stride*/, F* /*rstd*/, const A* /*inp*/,
                               int64_t /*in_stride*/, const F* /*weight*/, int64_t /*N*/, int64_t /*heads*/,
                               int64_t /*hd*/, double /*eps*/) const {
    missing_llama_op("rmsnorm_forward");
  }
  virtual void rmsnorm_backward(A* /*dinp*/, int64_t /*din_stride*/, F* /*dweight*/, const A* /*dout*/,
                                int64_t /*dout_stride*/, const A* /*inp*/, int64_t /*in_stride*/,
                                const F* /*weight*/, const F* /*rstd*/, int64_t /*N*/, int64_t /*heads*/,
                                int64_t /*hd*/, bool /*accumulate*/) const {
    missing_llama_op("rmsnorm_backward");
  }
  virtual void swiglu_forward(A* /*out*/, const A* /*inp*/, int64_t /*N*/, int64_t /*I*/) const {
    missing_llama_op("swiglu_forward");
  }
  virtual void swiglu_backward(A* /*dinp*/, const A* /*inp*/, const A* /*dout*/, int64_t /*N*/,
                               int64_t /*I*/) const {
    missing_llama_op("swiglu_backward");
  }
  // inv_freq: hd/2 host values (the table is computed once per model, model/rope_freqs.hpp).
  virtual void rope_forward_freqs(A* /*x*/, int64_t /*B*/, int64_t /*T*/, int64_t /*row_stride*/,
                                  int64_t /*col0*/, int64_t /*n_heads*/, int64_t /*hd*/,
                                  const double* /*inv_freq*/) const {
    missing_llama_op("rope_forward_freqs");
  }
  virtual void rope_backward_freqs(A* /*dx*/, int64_t /*B*/, int64_t /*T*/, int64_t /*row_stride*/,
                                   int64_t /*col0*/, int64_t /*n_heads*/, int64_t /*hd*/,
                                   const double* /*inv_freq*/) const {
    missing_llama_op("rope_backward_freqs");
  }
  // Whether the Llama-family ops above are implemented.
  virtual bool has_llama_ops() const { return false; }

  virtual void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                 const attn::AttnDims& dims, const attn::LayerHeadParams<F>& params, const A* qkv,
                                 A* out, F* row_stats, F* workspace) const = 0;
  virtual void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                  const attn::AttnDims& dims, const attn::LayerHeadParams<F>& params, const A* qkv,
                                  const A* out, const F* row_stats, const A* dout, A* dqkv, F* workspace) const = 0;
  // In elements of F.
  virtual int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                           const attn::AttnDims& dims) const = 0;

  // dst[i] = src[i] rounded to A (to nearest, ties to even): the GEMMs' copy of the weights,
  // refreshed from the F parameters before every forward of a mixed-precision step.
  virtual void round_weights(A* dst, const F* src, int64_t n) const = 0;

 private:
  [[noreturn]] static void missing_op(const char* op) {
    fail(std::string("this backend has no '") + op + "' op (LoRA adapters run on the CPU backend so far)");
  }
  [[noreturn]] static void missing_llama_op(const char* op) {
    fail(std::string("this backend has no '") + op + "' op (Llama-family models run on the CPU backend so far)");
  }
};

}  // namespace hw

// The CPU backend: forwards every op to the reference kernels in kernels/cpu and attention/.
#include <omp.h>

#include <cstring>
#include <type_traits>

#include "headwise/kernels/backend.hpp"
#include "headwise/kernels/cpu.hpp"
#include "model/backend_cpu_bf16.hpp"

namespace hw {

namespace {

template <class F>
class CpuBackend final : public Backend<F> {
 public:
  Device device() const override { return Device::CPU; }
  const char* name() const override { return "cpu"; }
  // Mixed precision for float models: the widen / fp32 op / round-once reference.
  const ComputeOps<bf16, F>* bf16_ops() const override {
    if constexpr (std::is_same_v<F, float>) return &cpu_bf16_ops();
    return nullptr;
  }

  void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t I, int64_t O,
                      bool w_out_in) const override {
    cpu::matmul_forward(out, inp, w, bias, N, I, O, w_out_in);
  }
  void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N, int64_t I,
                       int64_t O, bool w_out_in) const override {
    cpu::matmul_backward(dinp, dw, dbias, dout, inp, w, N, I, O, w_out_in);
  }
  void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int64_t N,
                         int64_t C, double eps) const override {
    cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
  }
  void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, const F* mean,
                          const F* rstd, int64_t N, int64_t C) const override {
    cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void gelu_forward(F* out, const F* inp, int64_t n) const override { cpu::gelu_forward(out, inp, n); }
  void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t n) const override {
    cpu::gelu_backward(dinp, inp, dout, n);
  }
  void gelu_backward_bias(F* dinp, F* dbias, const F* inp, const F* dout, int64_t N, int64_t O) const override {
    cpu::gelu_backward_bias(dinp, dbias, inp, dout, N, O);
  }
  void encoder_forward(F* out, const int32_t* tokens, const F* wte, const F* wpe, int64_t B, int64_t T,
                       int64_t C) const override {
    cpu::encoder_forward(out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) const override {
    cpu::encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void residual_forward(F* out, const F* a, const F* b, int64_t n) const override {
    cpu::residual_forward(out, a, b, n);
  }
  void accumulate(F* dst, const F* src, int64_t n) const override { cpu::accumulate(dst, src, n); }
  void add_columns(F* dst, int64_t stride, int64_t col0, const F* src, int64_t N, int64_t width) const override {
    cpu::add_columns(dst, stride, col0, src, N, width);
  }
  void copy_columns(F* dst, const F* src, int64_t stride, int64_t col0, int64_t N, int64_t width) const override {
    cpu::copy_columns(dst, src, stride, col0, N, width);
  }
  void dropout(F* out, const F* in, int64_t n, double p, uint64_t seed) const override {
    cpu::dropout(out, in, n, p, seed);
  }
  bool has_lora_ops() const override { return true; }
  bool has_dropout_op() const override { return true; }
  double crossentropy_forward_backward(F* losses, F* dlogits, const F* logits, const int32_t* targets, int64_t N,
                                       int64_t V, double dloss) const override {
    return cpu::crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, dloss);
  }
  void rope_forward(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                    double theta) const override {
    cpu::rope_forward(x, B, T, row_stride, col0, n_heads, hd, theta);
  }
  void rope_backward(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                     double theta) const override {
    cpu::rope_backward(dx, B, T, row_stride, col0, n_heads, hd, theta);
  }
  void rmsnorm_forward(F* out, int64_t out_stride, F* rstd, const F* inp, int64_t in_stride, const F* weight,
                       int64_t N, int64_t heads, int64_t hd, double eps) const override {
    cpu::rmsnorm_forward(out, out_stride, rstd, inp, in_stride, weight, N, heads, hd, eps);
  }
  void rmsnorm_backward(F* dinp, int64_t din_stride, F* dweight, const F* dout, int64_t dout_stride, const F* inp,
                        int64_t in_stride, const F* weight, const F* rstd, int64_t N, int64_t heads, int64_t hd,
                        bool accumulate) const override {
    cpu::rmsnorm_backward(dinp, din_stride, dweight, dout, dout_stride, inp, in_stride, weight, rstd, N, heads, hd,
                          accumulate);
  }
  void swiglu_forward(F* out, const F* inp, int64_t N, int64_t I) const override {
    cpu::swiglu_forward(out, inp, N, I);
  }
  void swiglu_backward(F* dinp, const F* inp, const F* dout, int64_t N, int64_t I) const override {
    cpu::swiglu_backward(dinp, inp, dout, N, I);
  }
  void rope_forward_freqs(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                          const double* inv_freq) const override {
    cpu::rope_forward_freqs(x, B, T, row_stride, col0, n_heads, hd, inv_freq);
  }
  void rope_backward_freqs(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                           const double* inv_freq) const override {
    cpu::rope_backward_freqs(dx, B, T, row_stride, col0, n_heads, hd, inv_freq);
  }
  bool has_llama_ops() const override { return true; }
  double sum_squares(const F* x, int64_t n) const override { return cpu::sum_squares(x, n); }
  void scale(F* x, F s, int64_t n) const override { cpu::scale(x, s, n); }
  void fill_zero(F* x, int64_t n) const override { cpu::fill_zero(x, n); }
  void adamw_update(F* p, const F* g, F* m, F* v, int64_t n, const AdamWStep& s) const override {
    cpu::adamw_update(p, g, m, v, n, s);
  }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) const override {
    if (bytes) std::memcpy(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) const override {
    if (bytes) std::memcpy(host_dst, src, bytes);
  }

  void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                         const attn::LayerHeadParams<F>& params, const F* qkv, F* out, F* row_stats,
                         F* workspace) const override {
    attn::layer_forward(plan, layout, dims, params, qkv, out, row_stats, workspace);
  }
  void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                          const attn::LayerHeadParams<F>& params, const F* qkv, const F* out, const F* row_stats,
                          const F* dout, F* dqkv, F* workspace) const override {
    attn::layer_backward(plan, layout, dims, params, qkv, out, row_stats, dout, dqkv, workspace);
  }
  int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) const override {
    return attn::workspace_size(plan, layout, dims, omp_get_max_threads());
  }
};

}  // namespace

template <class F>
const Backend<F>& cpu_backend() {
  static const CpuBackend<F> backend;
  return backend;
}

template const Backend<float>& cpu_backend<float>();
template const Backend<double>& cpu_backend<double>();

}  // namespace hw

// CPU mixed-precision reference: widen, run the fp32 op, round once (backend_cpu_bf16.hpp).
#include "model/backend_cpu_bf16.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <vector>

#include "headwise/kernels/cpu.hpp"

namespace hw {

namespace {

class CpuBf16Ops final : public ComputeOps<bf16, float> {
 public:
  void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I, int64_t O,
                      bool w_out_in) const override {
    float* y = slot(0, N * O);
    cpu::matmul_forward(y, widen(1, inp, N * I), widen(2, w, I * O), widen(3, bias, O), N, I, O, w_out_in);
    narrow(out, y, N * O);
  }
  void matmul_backward(bf16* dinp, float* dw, float* dbias, const bf16* dout, const bf16* inp, const bf16* w,
                       int64_t N, int64_t I, int64_t O, bool w_out_in) const override {
    float* dx = widen_grad(0, dinp, N * I);
    cpu::matmul_backward(dx, dw, dbias, widen(1, dout, N * O), widen(2, inp, N * I), widen(3, w, I * O), N, I, O,
                         w_out_in);
    narrow_grad(dinp, dx, N * I);
  }
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, double eps) const override {
    float* y = slot(0, N * C);
    cpu::layernorm_forward(y, mean, rstd, widen(1, inp, N * C), weight, bias, N, C, eps);
    narrow(out, y, N * C);
  }
  void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                          const float* weight, const float* mean, const float* rstd, int64_t N,
                          int64_t C) const override {
    float* dx = widen_grad(0, dinp, N * C);
    cpu::layernorm_backward(dx, dweight, dbias, widen(1, dout, N * C), widen(2, inp, N * C), weight, mean, rstd, N,
                            C);
    narrow_grad(dinp, dx, N * C);
  }
  void gelu_forward(bf16* out, const bf16* inp, int64_t n) const override {
    float* y = slot(0, n);
    cpu::gelu_forward(y, widen(1, inp, n), n);
    narrow(out, y, n);
  }
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) const override {
    float* dx = widen_mut(0, dinp, n);
    cpu::gelu_backward(dx, widen(1, inp, n), widen(2, dout, n), n);
    narrow(dinp, dx, n);
  }
  void encoder_forward(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int64_t B, int64_t T,
                       int64_t C) const override {
    // Only the rows the tokens use are widened, so a large vocabulary costs nothing extra.
    float* rows = slot(1, B * T * C);
    for (int64_t i = 0; i < B * T; ++i)
      for (int64_t c = 0; c < C; ++c) rows[i * C + c] = to_float(wte[int64_t(tokens[i]) * C + c]);
    float* y = slot(0, B * T * C);
    const float* pos = widen(2, wpe, T * C);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = (b * T + t) * C + c;
          y[i] = pos ? rows[i] + pos[t * C + c] : rows[i];
        }
    narrow(out, y, B * T * C);
  }
  void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) const override {
    cpu::encoder_backward(dwte, dwpe, widen(0, dout, B * T * C), tokens, B, T, C);
  }
  void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t n) const override {
    float* y = slot(0, n);
    cpu::residual_forward(y, widen(1, a, n), widen(2, b, n), n);
    narrow(out, y, n);
  }
  void accumulate(bf16* dst, const bf16* src, int64_t n) const override {
    float* d = widen_mut(0, dst, n);
    cpu::accumulate(d, widen(1, src, n), n);
    narrow(dst, d, n);
  }
  double crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits, const int32_t* targets,
                                       int64_t N, int64_t V, double dloss) const override {
    float* x = widen_mut(0, logits, N * V);
    const double sum = cpu::crossentropy_forward_backward(losses, dlogits ? x : nullptr, x, targets, N, V, dloss);
    if (dlogits) narrow(dlogits, x, N * V);
    return sum;
  }
  void rope_forward(bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                    double theta) const override {
    float* y = widen_mut(0, x, B * T * row_stride);
    cpu::rope_forward(y, B, T, row_stride, col0, n_heads, hd, theta);
    narrow(x, y, B * T * row_stride);
  }
  void rope_backward(bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                     double theta) const override {
    float* y = widen_mut(0, dx, B * T * row_stride);
    cpu::rope_backward(y, B, T, row_stride, col0, n_heads, hd, theta);
    narrow(dx, y, B * T * row_stride);
  }
  // Strided ops widen and narrow whole rows (the columns between the heads come back unchanged).
  void rmsnorm_forward(bf16* out, int64_t out_stride, float* rstd, const bf16* inp, int64_t in_stride,
                       const float* weight, int64_t N, int64_t heads, int64_t hd, double eps) const override {
    const int64_t out_n = span(N, out_stride, heads * hd), in_n = span(N, in_stride, heads * hd);
    float* y = widen_mut(0, out, out_n);  // (columns outside the heads keep their values)
    cpu::rmsnorm_forward(y, out_stride, rstd, widen(1, inp, in_n), in_stride, weight, N, heads, hd, eps);
    narrow(out, y, out_n);
  }
  void rmsnorm_backward(bf16* dinp, int64_t din_stride, float* dweight, const bf16* dout, int64_t dout_stride,
                        const bf16* inp, int64_t in_stride, const float* weight, const float* rstd, int64_t N,
                        int64_t heads, int64_t hd, bool accumulate) const override {
    const int64_t w = heads * hd;
    const int64_t din_n = span(N, din_stride, w), dout_n = span(N, dout_stride, w), in_n = span(N, in_stride, w);
    const float* dy = widen(2, dout, dout_n);
    float* dx = widen_grad(0, dinp, din_n);
    cpu::rmsnorm_backward(dx, din_stride, dweight, dy, dout_stride, widen(1, inp, in_n), in_stride, weight, rstd, N,
                          heads, hd, accumulate);
    narrow_grad(dinp, dx, din_n);
  }
  void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int64_t I) const override {
    float* y = slot(0, N * I);
    cpu::swiglu_forward(y, widen(1, inp, N * 2 * I), N, I);
    narrow(out, y, N * I);
  }
  void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int64_t I) const override {
    float* dx = slot(0, N * 2 * I);
    cpu::swiglu_backward(dx, widen(1, inp, N * 2 * I), widen(2, dout, N * I), N, I);
    narrow(dinp, dx, N * 2 * I);
  }
  void rope_forward_freqs(bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                          int64_t hd, const double* inv_freq) const override {
    float* y = widen_mut(0, x, B * T * row_stride);
    cpu::rope_forward_freqs(y, B, T, row_stride, col0, n_heads, hd, inv_freq);
    narrow(x, y, B * T * row_stride);
  }
  void rope_backward_freqs(bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                           int64_t hd, const double* inv_freq) const override {
    float* y = widen_mut(0, dx, B * T * row_stride);
    cpu::rope_backward_freqs(y, B, T, row_stride, col0, n_heads, hd, inv_freq);
    narrow(dx, y, B * T * row_stride);
  }
  // Exact (a copy of bf16 values): q/k norm keeps the heads' raw values for its backward.
  void copy_columns(bf16* dst, const bf16* src, int64_t stride, int64_t col0, int64_t N,
                    int64_t width) const override {
    for (int64_t n = 0; n < N; ++n) std::copy(src + n * stride + col0, src + n * stride + col0 + width, dst + n * width);
  }
  bool has_llama_ops() const override { return true; }
  void dropout(bf16* out, const bf16* in, int64_t n, double p, uint64_t seed) const override {
    float* y = widen_mut(0, in, n);
    cpu::dropout(y, y, n, p, seed);
    narrow(out, y, n);
  }
  bool has_dropout_op() const override { return true; }
  void fill_zero(bf16* x, int64_t n) const override { std::fill(x, x + n, bf16{}); }

  void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                         const attn::LayerHeadParams<float>& params, const bf16* qkv, bf16* out, float* row_stats,
                         float* workspace) const override {
    const int64_t N = dims.B * dims.T;
    float* y = slot(0, N * layout.out_width());
    attn::layer_forward(plan, layout, dims, params, widen(1, qkv, N * layout.qkv_width()), y, row_stats, workspace);
    narrow(out, y, N * layout.out_width());
  }
  void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                          const attn::LayerHeadParams<float>& params, const bf16* qkv, const bf16* out,
                          const float* row_stats, const bf16* dout, bf16* dqkv, float* workspace) const override {
    const int64_t N = dims.B * dims.T;
    float* dx = slot(0, N * layout.qkv_width());
    attn::layer_backward(plan, layout, dims, params, widen(1, qkv, N * layout.qkv_width()),
                         widen(2, out, N * layout.out_width()), row_stats, widen(3, dout, N * layout.out_width()), dx,
                         workspace);
    narrow(dqkv, dx, N * layout.qkv_width());
  }
  int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) const override {
    return attn::workspace_size(plan, layout, dims, omp_get_max_threads());
  }
  void round_weights(bf16* dst, const float* src, int64_t n) const override { narrow(dst, src, n); }

 private:
  // Elements from the first row's start to the end of the last row's `width` (strided rows).
  static int64_t span(int64_t N, int64_t stride, int64_t width) { return N > 0 ? (N - 1) * stride + width : 0; }
  // Conversion buffer k, at least n floats (grown, never shrunk).
  float* slot(int k, int64_t n) const {
    auto& s = slots_[static_cast<size_t>(k)];
    if (s.size() < static_cast<size_t>(n)) s.resize(static_cast<size_t>(n));
    return s.data();
  }
  float* widen_mut(int k, const bf16* x, int64_t n) const {
    float* y = slot(k, n);
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 16))
    for (int64_t i = 0; i < n; ++i) y[i] = to_float(x[i]);
    return y;
  }
  const float* widen(int k, const bf16* x, int64_t n) const { return x ? widen_mut(k, x, n) : nullptr; }
  // An accumulated activation gradient that may be null (skipped, as in the fp32 ops).
  float* widen_grad(int k, const bf16* x, int64_t n) const { return x ? widen_mut(k, x, n) : nullptr; }
  static void narrow_grad(bf16* y, const float* x, int64_t n) {
    if (y) narrow(y, x, n);
  }
  static void narrow(bf16* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 16))
    for (int64_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);
  }

  mutable std::array<std::vector<float>, 4> slots_;
};

}  // namespace

const ComputeOps<bf16, float>& cpu_bf16_ops() {
  static const CpuBf16Ops ops;
  return ops;
}

}  // namespace hw

#pragma once
// CPU reference ops. Every op is a template over the float type: float is the training
// path, double is the test path (finite differences). Layout conventions (llm.c style):
// activations are row-major [N, C] with N = B*T tokens; weights use Hugging Face GPT-2's
// Conv1D layout [in, out] unless stated. Backward ops ACCUMULATE (+=) into gradients, so
// callers zero gradients once per optimizer update. Any gradient pointer may be null to
// skip that gradient. Ops are deterministic for a fixed OpenMP thread count (no atomics,
// no unordered floating-point reductions).
#include <cstdint>

#include "headwise/kernels/adamw_step.hpp"

namespace hw::cpu {

// out[N,O] = inp[N,I] @ W + bias. W is [I,O] (Conv1D), or [O,I] when w_out_in is true
// (the tied LM head uses wte [V,C] this way). bias may be null. Overwrites out.
template <class F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t I, int64_t O,
                    bool w_out_in = false);
// out[N, 0..O) (row stride ldo) = inp[N,I] @ W^T (+ bias), W fp32 [O,I]: a column panel of a
// wider product (gemv.hpp's matmul_half widens 16-bit weights panel by panel into W).
void gemm_rows_wt(float* out, int64_t ldo, const float* inp, const float* w, int64_t N, int64_t I, int64_t O,
                  const float* bias);
// dinp[N,I] += dout @ W^T;  dw += inp^T @ dout (in W's layout);  dbias[O] += sum over rows of dout.
template <class F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N, int64_t I,
                     int64_t O, bool w_out_in = false);

// LayerNorm over the last dimension C (biased variance, as PyTorch); saves mean and rstd per
// row for backward (either may be null when no backward follows).
template <class F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int64_t N, int64_t C,
                       double eps);
template <class F>
void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, const F* mean,
                        const F* rstd, int64_t N, int64_t C);

// GELU, tanh approximation (GPT-2's "gelu_new").
template <class F>
void gelu_forward(F* out, const F* inp, int64_t n);
template <class F>
void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t n);
// dinp[N,O] = dout * gelu'(inp) (overwrite), dbias[O] += column sums of dinp (dbias may be
// null): gelu_backward on zeroed dinp plus matmul_backward's bias gradient, bit for bit, in one pass.
template <class F>
void gelu_backward_bias(F* dinp, F* dbias, const F* inp, const F* dout, int64_t N, int64_t O);

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] (wpe may be null: RoPE models). Overwrites out.
// Tokens are not range-checked here (no vocabulary size is passed): callers validate them.
template <class F>
void encoder_forward(F* out, const int32_t* tokens, const F* wte, const F* wpe, int64_t B, int64_t T, int64_t C);
// dwte[token] += dout; dwpe[t] += sum over b of dout. Deterministic (no scatter races).
template <class F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* tokens, int64_t B, int64_t T, int64_t C);

// out = a + b, elementwise (out may alias a).
template <class F>
void residual_forward(F* out, const F* a, const F* b, int64_t n);
// dst += src
template <class F>
void accumulate(F* dst, const F* src, int64_t n);

// Softmax cross-entropy per row of logits [N,V]: losses[n] = logsumexp(logits[n]) - logits[n,target[n]].
// If dlogits is non-null, writes (softmax(logits[n]) - onehot(target[n])) * dloss into it
// (overwrite; dlogits may alias logits). Returns the sum of losses in double. losses may be
// null. Throws hw::Error naming the token and position if a target is outside [0, V).
// Targets equal to kIgnoreTarget contribute no loss and a zero gradient row (losses on a
// subset of positions, e.g. MQAR query positions).
constexpr int32_t kIgnoreTarget = -1;
template <class F>
double crossentropy_forward_backward(F* losses, F* dlogits, const F* logits, const int32_t* targets, int64_t N,
                                     int64_t V, double dloss);

// Rotary position embedding, rotate-half convention (GPT-NeoX / Llama): for each head vector
// x of width hd at position t, pairs (x[i], x[i+hd/2]) rotate by angle t * theta^(-2i/hd).
// x holds B*T rows of `row_stride` elements; the heads to rotate are n_heads consecutive
// hd-wide blocks starting at column col0. In place. Backward applies the inverse rotation
// to the gradient in place. Throws hw::Error unless hd is positive and even and theta > 0.
template <class F>
void rope_forward(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                  double theta);
template <class F>
void rope_backward(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                   double theta);

// The same rotation with pair i's frequency inv_freq[i] (hd/2 values: Llama 3's scaled
// frequencies, model/rope_freqs.hpp) and row t of each sequence at position pos0 + t (cached
// decoding feeds rows after the cache). rope_forward(theta) equals inv_freq[i] = theta^(-2i/hd), pos0 = 0.
template <class F>
void rope_forward_freqs(F* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                        const double* inv_freq, int64_t pos0 = 0);
template <class F>
void rope_backward_freqs(F* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                         const double* inv_freq, int64_t pos0 = 0);

// RMSNorm (Llama / Qwen): y = weight * x * rstd, rstd = 1 / sqrt(mean(x^2) + eps), over each of
// `heads` consecutive hd-wide blocks of N rows (rows `in_stride` / `out_stride` apart): heads = 1,
// hd = C for the residual stream; heads = n_q, hd = head_dim for Qwen3's q/k norm, where the
// heads share one weight vector [hd]. rstd [N * heads] may be null; out may alias inp (in place).
template <class F>
void rmsnorm_forward(F* out, int64_t out_stride, F* rstd, const F* inp, int64_t in_stride, const F* weight, int64_t N,
                     int64_t heads, int64_t hd, double eps);
// dinp += (accumulate) or = (overwrite; dinp may then alias dout) the input gradient;
// dweight[hd] += sum over rows and heads of dout * x * rstd. Either may be null.
template <class F>
void rmsnorm_backward(F* dinp, int64_t din_stride, F* dweight, const F* dout, int64_t dout_stride, const F* inp,
                      int64_t in_stride, const F* weight, const F* rstd, int64_t N, int64_t heads, int64_t hd,
                      bool accumulate);

// SwiGLU: out[N, I] = silu(inp[:, :I]) * inp[:, I:] (inp [N, 2I]: gate | up), silu(x) = x sigmoid(x).
template <class F>
void swiglu_forward(F* out, const F* inp, int64_t N, int64_t I);
// dinp[N, 2I] = the gradient of gate | up (overwrite).
template <class F>
void swiglu_backward(F* dinp, const F* inp, const F* dout, int64_t N, int64_t I);

// Sum of squares of x (double accumulation, fixed order for a fixed thread count).
template <class F>
double sum_squares(const F* x, int64_t n);
template <class F>
void scale(F* x, F s, int64_t n);
template <class F>
void fill_zero(F* x, int64_t n);
// One softmax row in float64 on the calling thread: x[j] = exp(x[j] - max x) for j < n, their
// sum returned. The exp is vec_math.hpp's vexp_f64 (vectorized, within about 1 ulp of
// std::exp), for float64 arithmetic that is a method's own rather than a test path.
double softmax_numerators_f64(double* x, int64_t n);

// LoRA (lora_ops.cpp). dst[n, col0 + j] += src[n, j] (dst rows `stride` wide, src rows `width`).
template <class F>
void add_columns(F* dst, int64_t stride, int64_t col0, const F* src, int64_t N, int64_t width);
// dst[n, j] = src[n, col0 + j]. Overwrites dst.
template <class F>
void copy_columns(F* dst, const F* src, int64_t stride, int64_t col0, int64_t N, int64_t width);
// Inverted dropout: out[i] = in[i] / (1 - p) where dropout_keeps(seed, i, p), else 0. The mask is
// a pure function of (seed, i): the same call on the output gradient is the backward.
template <class F>
void dropout(F* out, const F* in, int64_t n, double p, uint64_t seed);
bool dropout_keeps(uint64_t seed, int64_t i, double p);

// One AdamW update of n consecutive elements (formula in kernels/adamw_step.hpp), in F.
template <class F>
void adamw_update(F* p, const F* g, F* m, F* v, int64_t n, const AdamWStep& s);

}  // namespace hw::cpu

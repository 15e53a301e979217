#pragma once
// The decoder layer's sequence, written once for every family and used by the training forward
// (Model::forward_layer_as, model.cpp) and by cached decoding (infer::CachedDecoder): norms, the
// QKV product, q/k norm, RoPE, attention, the output product, the residuals and the MLP. What
// differs between the two lives in the caller's Step (how a matrix product reads its weights,
// LoRA, dropout, where RoPE's positions start, what attention reads); what the family chooses
// lives in LayerFamily. The norm's statistics and q/k norm's input are saved only when the
// caller gives buffers for them (backward reads them; decoding gives none).
#include <cstdint>
#include <type_traits>

#include "headwise/attention/head_plan.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model_config.hpp"

namespace hw::model_detail {

// The family's choices that the layer's sequence reads.
struct LayerFamily {
  int64_t C = 0, D = 0;        // n_embd, head_dim
  int64_t mlp = 0, fc = 0;     // the MLP's width and its first product's columns (2x for SwiGLU)
  double eps = 0;
  bool rmsnorm = false, swiglu = false, qk_norm = false;

  static LayerFamily of(const ModelConfig& cfg) {
    return {cfg.n_embd, cfg.head_dim(), cfg.intermediate(), cfg.fc_width(), cfg.layer_norm_epsilon,
            cfg.rmsnorm(), cfg.swiglu(), cfg.qk_norm};
  }
};

// The layer's four matrices, in the order of the sequence.
enum class LayerMatrix : uint8_t { QKV, Out, Fc, FcProj };

// n rows through layer l: the buffers (A, the activation type) and the norm weights (F).
template <class A, class F>
struct LayerRows {
  int64_t n = 0;
  const attn::LayerLayout* layout = nullptr;
  const A* in = nullptr;  // the residual stream into the layer
  const A* ln1 = nullptr;  // its norm (the step before wrote it)
  A *qkv = nullptr, *att = nullptr, *resid2 = nullptr, *ln2 = nullptr, *fch = nullptr, *fch_act = nullptr;
  A *resid3 = nullptr, *ln_next = nullptr;  // the residual out and its norm (the next layer's ln1, or ln_f)
  const F *ln2_w = nullptr, *ln2_b = nullptr, *next_w = nullptr, *next_b = nullptr;
  const F *q_norm = nullptr, *k_norm = nullptr;
  // Saved for backward; null when nothing will be differentiated.
  A* qk_raw = nullptr;  // q|k columns before q/k norm [n, (n_q + n_k) D]
  F* qk_rstd = nullptr;
  F *ln2_mean = nullptr, *ln2_rstd = nullptr, *next_mean = nullptr, *next_rstd = nullptr;
};

// LayerNorm (weight, bias; mean and rstd saved when given) or RMSNorm (weight; rstd) over rows of C.
template <class A, class F>
void norm_rows(const ComputeOps<A, F>& o, const LayerFamily& fam, A* out, std::type_identity_t<F>* mean,
               std::type_identity_t<F>* rstd, const A* in, const F* w, const F* b, int64_t n) {
  if (fam.rmsnorm)
    o.rmsnorm_forward(out, fam.C, rstd, in, fam.C, w, n, 1, fam.C, fam.eps);
  else
    o.layernorm_forward(out, mean, rstd, in, w, b, n, fam.C, fam.eps);
}

// resid = a + b (resid may alias a), then its norm.
template <class A, class F>
void residual_norm_rows(const ComputeOps<A, F>& o, const LayerFamily& fam, A* resid, A* out,
                        std::type_identity_t<F>* mean, std::type_identity_t<F>* rstd, const A* a, const A* b,
                        const F* w, const F* bias, int64_t n) {
  if (fam.rmsnorm) {
    o.residual_forward(resid, a, b, n * fam.C);
    o.rmsnorm_forward(out, fam.C, rstd, resid, fam.C, w, n, 1, fam.C, fam.eps);
  } else {
    o.residual_layernorm_forward(resid, out, mean, rstd, a, b, w, bias, n, fam.C, fam.eps);
  }
}

// Step, the caller's side of the sequence:
//   void linear(LayerMatrix m, A* out, const A* in)   out = in W (+ bias) (+ an adapter's share)
//   bool linear_gelu(A* pre, A* post, const A* in)    GELU's product fused with it; false: not here
//   void rope(A* qkv)                                 rotate the Q and K blocks at the rows' positions
//   void attention(const A* qkv, A* att)              the layer's heads (+ whatever observes them)
//   void dropout(int site, A* x)                      site 1 after attention, 2 after the MLP

// The layer's Q, K and V as attention reads them (the product, Qwen3's q/k norms, RoPE): the
// start of layer_forward_rows, alone for a caller that needs nothing after them (a calibration
// stream's last layer).
template <class A, class F, class Step>
void layer_qkv_rows(const ComputeOps<A, F>& o, const LayerFamily& fam, const LayerRows<A, F>& r, Step& step) {
  const attn::LayerLayout& lay = *r.layout;
  const int64_t n = r.n, ldx = lay.qkv_width(), D = fam.D;
  step.linear(LayerMatrix::QKV, r.qkv, r.ln1);
  if (fam.qk_norm) {  // each q and k head RMS-normalised (Qwen3), before RoPE
    const int64_t nq = int64_t(lay.n_q) * D, nqk = int64_t(lay.n_q + lay.n_k) * D;
    const A* raw = r.qkv;  // in place, unless backward needs the input
    int64_t ld_raw = ldx;
    if (r.qk_raw) {
      o.copy_columns(r.qk_raw, r.qkv, ldx, 0, n, nqk);
      raw = r.qk_raw;
      ld_raw = nqk;
    }
    o.rmsnorm_forward(r.qkv, ldx, r.qk_rstd, raw, ld_raw, r.q_norm, n, lay.n_q, D, fam.eps);
    o.rmsnorm_forward(r.qkv + nq, ldx, r.qk_rstd ? r.qk_rstd + n * lay.n_q : nullptr, raw + nq, ld_raw, r.k_norm, n,
                      lay.n_k, D, fam.eps);
  }
  step.rope(r.qkv);
}

// The whole layer: its Q, K and V, then attention, the output product, the MLP and the next norm.
template <class A, class F, class Step>
void layer_forward_rows(const ComputeOps<A, F>& o, const LayerFamily& fam, const LayerRows<A, F>& r, Step& step) {
  const int64_t n = r.n;
  layer_qkv_rows(o, fam, r, step);
  step.attention(r.qkv, r.att);
  step.linear(LayerMatrix::Out, r.resid2, r.att);
  step.dropout(1, r.resid2);
  residual_norm_rows(o, fam, r.resid2, r.ln2, r.ln2_mean, r.ln2_rstd, r.resid2, r.in, r.ln2_w, r.ln2_b, n);
  if (fam.swiglu) {  // fch = gate | up, then silu(gate) * up
    step.linear(LayerMatrix::Fc, r.fch, r.ln2);
    o.swiglu_forward(r.fch_act, r.fch, n, fam.mlp);
  } else if (!step.linear_gelu(r.fch, r.fch_act, r.ln2)) {
    step.linear(LayerMatrix::Fc, r.fch, r.ln2);
    o.gelu_forward(r.fch_act, r.fch, n * fam.mlp);
  }
  step.linear(LayerMatrix::FcProj, r.resid3, r.fch_act);
  step.dropout(2, r.resid3);
  residual_norm_rows(o, fam, r.resid3, r.ln_next, r.next_mean, r.next_rstd, r.resid3, r.resid2, r.next_w, r.next_b,
                     n);
}

}  // namespace hw::model_detail

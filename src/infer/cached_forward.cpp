// The forward of cached decoding (cached_forward.hpp).
#include "infer/cached_forward.hpp"

#include <omp.h>

#include <algorithm>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/gemv.hpp"
#include "headwise/model/rope_freqs.hpp"
#include "model/layer_forward.hpp"
#include "model/model_impl.hpp"

namespace hw::infer {

struct CachedForward::Impl {
  const Model<float>* model = nullptr;
  int L = 0, C = 0, V = 0;
  int64_t rows = 0;  // rows of one sequence per run
  model_detail::LayerFamily family;
  std::vector<double> inv_freq;  // rotary frequencies (rope_freqs.hpp); empty: learned positions
  const model_detail::Weights<float>* w = nullptr;  // the model's parameters by role
  const float* head = nullptr;  // the LM head: wte, or an untied lm_head
  bool half = false;            // matrices read as 16-bit copies (layers_h, head_h)
  bool out_in = false;          // fp32 layer matrices re-laid [out, in] (Fp32Layout::OutIn)
  std::vector<HalfLayer> layers_h;
  cpu::HalfMatrix head_h;
  std::vector<float> panel;     // a prefill's widened weight panel (cpu::matmul_half), sized once
  std::unique_ptr<attn::CachedAttention> attention;
  // activations of every row of a run; the last rows' norms gathered for the LM head
  std::vector<float> x, ln, qkv, att, r2, fch, fchg, r3, last_ln, last_logits;
};

CachedForward::CachedForward(const Model<float>& model, const attn::KvCache& like, int64_t rows, int max_seqs,
                             int64_t split_cols, WeightPrecision weights, HalfWeights half, Fp32Layout layout)
    : impl_(std::make_unique<Impl>()) {
  const ModelConfig& cfg = model.config();
  Impl& m = *impl_;
  m.model = &model;
  m.L = cfg.n_layer;
  m.C = cfg.n_embd;
  m.V = cfg.vocab_size;
  m.rows = rows;
  m.family = model_detail::LayerFamily::of(cfg);
  if (cfg.rope()) m.inv_freq = rope_inv_freq(cfg);
  m.out_in = layout == Fp32Layout::OutIn;
  m.w = &model.weights();
  m.head = cfg.tie_word_embeddings ? m.w->wte : m.w->lm_head;
  int64_t max_qkv = 0, max_out = 0;
  std::vector<const attn::LayerHeadParams<float>*> head_params;
  for (int l = 0; l < m.L; ++l) {
    const auto& lay = model.layouts()[size_t(l)];
    max_qkv = std::max(max_qkv, lay.qkv_width());
    max_out = std::max(max_out, lay.out_width());
    head_params.push_back(&model.head_params(l));
  }
  if (weights != WeightPrecision::FP32) {
    m.half = true;
    if (half.empty()) {  // round the model's own
      half.take(model, weights, cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight", m.head);
      for (int l = 0; l < m.L; ++l) {
        const auto& W = m.w->layers[size_t(l)];
        const float* mats[4] = {W.attn_w, W.proj_w, W.fc_w, W.fcproj_w};
        for (int k = 0; k < 4; ++k)
          check(half.take(model, weights, layer_matrix_name(l, k), mats[k]),
                "internal: decoder matrix " + layer_matrix_name(l, k));
      }
    }
    const cpu::HalfType t = weights == WeightPrecision::BF16 ? cpu::HalfType::BF16 : cpu::HalfType::F16;
    check(int(half.layers.size()) == m.L && half.head.O == m.V && half.head.I == m.C && half.head.type == t,
          "decoder: the 16-bit matrices given do not match the model or the precision");
    int64_t widest = m.C;
    for (int l = 0; l < m.L; ++l) {
      const HalfLayer& W = half.layers[size_t(l)];
      const auto& lay = model.layouts()[size_t(l)];
      for (const auto* M : {&W.attn, &W.proj, &W.fc, &W.fcp})
        check(!M->empty() && M->type == t, "decoder: layer " + std::to_string(l) + " lacks a 16-bit matrix");
      check(W.attn.I == m.C && W.attn.O == lay.qkv_width() && W.proj.I == lay.out_width() && W.proj.O == m.C &&
                W.fc.I == m.C && W.fc.O == m.family.fc && W.fcp.I == m.family.mlp && W.fcp.O == m.C,
            "decoder: layer " + std::to_string(l) + "'s 16-bit matrices do not match the model's shapes");
      widest = std::max({widest, lay.out_width(), m.family.mlp});
    }
    m.layers_h = std::move(half.layers);
    m.head_h = std::move(half.head);
    m.panel.resize(size_t(cpu::kPanelRows * widest));
  }
  const auto n = size_t(rows) * size_t(max_seqs);
  m.x.resize(n * size_t(m.C));
  m.ln.resize(n * size_t(m.C));
  m.qkv.resize(n * size_t(std::max<int64_t>(max_qkv, 1)));
  m.att.resize(n * size_t(std::max<int64_t>(max_out, 1)));
  m.r2.resize(n * size_t(m.C));
  m.fch.resize(n * size_t(m.family.fc));
  m.fchg.resize(n * size_t(m.family.mlp));
  m.r3.resize(n * size_t(m.C));
  m.last_ln.resize(size_t(max_seqs) * size_t(m.C));
  m.last_logits.resize(size_t(max_seqs) * size_t(m.V));
  // (for `threads` = omp_get_max_threads() at construction: the attention region runs with
  // exactly that many)
  m.attention = std::make_unique<attn::CachedAttention>(cfg.head_plan, model.layouts(), head_params, like, rows,
                                                        max_seqs, split_cols, std::max(1, omp_get_max_threads()));
}

CachedForward::~CachedForward() = default;

int CachedForward::vocab_size() const { return impl_->V; }

size_t CachedForward::scratch_bytes() const {
  const Impl& m = *impl_;
  size_t f = 0;
  for (const auto* v : {&m.x, &m.ln, &m.qkv, &m.att, &m.r2, &m.fch, &m.fchg, &m.r3, &m.last_ln, &m.last_logits})
    f += v->size();
  return (f + m.panel.size()) * sizeof(float) + m.attention->scratch_bytes();
}

size_t CachedForward::half_weight_bytes() const {
  const Impl& m = *impl_;
  size_t n = size_t(m.head_h.size());
  for (const HalfLayer& W : m.layers_h) n += size_t(W.attn.size() + W.proj.size() + W.fc.size() + W.fcp.size());
  return n * sizeof(uint16_t);
}

size_t CachedForward::weight_bytes_per_token() const {
  const Impl& m = *impl_;
  if (m.half) return half_weight_bytes();
  size_t n = size_t(m.V) * size_t(m.C);
  for (int l = 0; l < m.L; ++l) {
    const auto& lay = m.model->layouts()[size_t(l)];
    n += size_t(m.C * lay.qkv_width() + lay.out_width() * m.C + m.C * m.family.fc + m.family.mlp * m.C);
  }
  return n * sizeof(float);
}

namespace {

// The decoder's side of the layer sequence (layer_forward.hpp): products from the 16-bit copies
// or the model's fp32 matrices ([in, out], or re-laid [out, in]) over every row; RoPE of each
// sequence's rows from its cache's length; the cached attention. No adapters, no dropout.
struct CachedStep {
  const Backend<float>& ops;
  const model_detail::LayerWeights<float>& W;
  const HalfLayer* H;  // null: fp32
  const attn::LayerLayout& lay;
  const model_detail::LayerFamily& fam;
  std::vector<float>& panel;
  const std::vector<double>& inv_freq;
  attn::CachedAttention& cached;
  const attn::CachedRows* seqs;
  int n_seqs;
  int64_t n;  // rows of all sequences
  int l;
  bool out_in;

  void product(float* out, const float* in, const float* w, const cpu::HalfMatrix* wh, const float* bias, int64_t I,
               int64_t O) {
    if (wh)
      cpu::matmul_half(out, in, *wh, bias, n, panel);
    else  // (one row: OpenBLAS GEMVs over the threads, matmul.cpp's row_gemv)
      ops.matmul_forward(out, in, w, bias, n, I, O, out_in);
  }
  void linear(model_detail::LayerMatrix which, float* out, const float* in) {
    using M = model_detail::LayerMatrix;
    const int64_t C = fam.C;
    switch (which) {
      case M::QKV: product(out, in, W.attn_w, H ? &H->attn : nullptr, W.attn_b, C, lay.qkv_width()); break;
      case M::Out: product(out, in, W.proj_w, H ? &H->proj : nullptr, W.proj_b, lay.out_width(), C); break;
      case M::Fc: product(out, in, W.fc_w, H ? &H->fc : nullptr, W.fc_b, C, fam.fc); break;
      case M::FcProj: product(out, in, W.fcproj_w, H ? &H->fcp : nullptr, W.fcproj_b, fam.mlp, C); break;
    }
  }
  bool linear_gelu(float* pre, float* post, const float* in) {
    if (H || out_in) return false;
    ops.matmul_gelu_forward(pre, post, in, W.fc_w, W.fc_b, n, fam.C, fam.mlp);
    return true;
  }
  // Rotate-half at each row's original position; the Q blocks then the K blocks are contiguous
  // from column 0.
  void rope(float* qkv) {
    if (inv_freq.empty()) return;
    const int64_t ldx = lay.qkv_width();
    for (int s = 0; s < n_seqs; ++s)
      cpu::rope_forward_freqs(qkv + seqs[s].row0 * ldx, 1, seqs[s].n, ldx, 0, lay.n_q + lay.n_k, int(fam.D),
                              inv_freq.data(), seqs[s].cache->length());
  }
  void attention(const float* qkv, float* att) { cached.run(l, seqs, n_seqs, qkv, att); }
  void dropout(int, float*) {}
};

}  // namespace

void CachedForward::run(const int32_t* tokens, const attn::CachedRows* seqs, int n_seqs, float* all_logits,
                        float* const* last) {
  Impl& m = *impl_;
  const Backend<float>& ops = m.model->ops();
  const int64_t C = m.C;
  const model_detail::Weights<float>& w = *m.w;
  int64_t n = 0;
  for (int s = 0; s < n_seqs; ++s) n = std::max(n, seqs[s].row0 + seqs[s].n);
  // Embeddings at each row's position.
  for (int s = 0; s < n_seqs; ++s)
    for (int64_t r = seqs[s].row0; r < seqs[s].row0 + seqs[s].n; ++r) {
      float* y = m.x.data() + r * C;
      if (m.half && m.head == w.wte) {  // tied: the embedding is the LM head's 16-bit row
        const uint16_t* e = m.head_h.w + int64_t(tokens[r]) * C;
        if (m.head_h.type == cpu::HalfType::BF16)
          for (int64_t c = 0; c < C; ++c) y[c] = cpu::bf16_to_float(e[c]);
        else
          for (int64_t c = 0; c < C; ++c) y[c] = cpu::f16_to_float(e[c]);
      } else {
        const float* e = w.wte + int64_t(tokens[r]) * C;
        std::copy(e, e + C, y);
      }
      if (w.wpe) {
        const float* p = w.wpe + (seqs[s].cache->length() + r - seqs[s].row0) * C;
        for (int64_t c = 0; c < C; ++c) y[c] += p[c];
      }
    }
  float* x = m.x.data();
  float* r3 = m.r3.data();
  if (m.L > 0)
    model_detail::norm_rows(ops, m.family, m.ln.data(), nullptr, nullptr, x, w.layers[0].ln1_w, w.layers[0].ln1_b, n);
  else
    model_detail::norm_rows(ops, m.family, m.ln.data(), nullptr, nullptr, x, w.lnf_w, w.lnf_b, n);
  for (int l = 0; l < m.L; ++l) {
    const auto& W = w.layers[size_t(l)];
    const bool last_layer = l + 1 == m.L;
    model_detail::LayerRows<float, float> r;
    r.n = n;
    r.layout = &m.model->layouts()[size_t(l)];
    r.in = x;
    r.ln1 = m.ln.data();
    r.qkv = m.qkv.data();
    r.att = m.att.data();
    r.resid2 = m.r2.data();
    r.ln2 = m.ln.data();  // (ln1 is read by the QKV product before ln2 is written)
    r.fch = m.fch.data();
    r.fch_act = m.fchg.data();
    r.resid3 = r3;
    r.ln_next = m.ln.data();
    r.ln2_w = W.ln2_w;
    r.ln2_b = W.ln2_b;
    r.next_w = last_layer ? w.lnf_w : w.layers[size_t(l + 1)].ln1_w;
    r.next_b = last_layer ? w.lnf_b : w.layers[size_t(l + 1)].ln1_b;
    r.q_norm = W.q_norm;
    r.k_norm = W.k_norm;
    CachedStep step{ops,     W,      m.half ? &m.layers_h[size_t(l)] : nullptr, *r.layout, m.family, m.panel,
                    m.inv_freq, *m.attention, seqs, n_seqs, n, l, m.out_in};
    model_detail::layer_forward_rows(ops, m.family, r, step);
    std::swap(x, r3);
  }
  // LM head (wte, or an untied lm_head) on the final norm's output: every row, or each
  // sequence's last row (gathered: one product for the batch).
  const cpu::HalfMatrix* head_h = m.half ? &m.head_h : nullptr;
  auto head = [&](float* out, const float* in, int64_t rows) {
    if (head_h) cpu::matmul_half(out, in, *head_h, nullptr, rows, m.panel);
    else ops.matmul_forward(out, in, m.head, nullptr, rows, C, m.V, /*w_out_in=*/true);
  };
  if (all_logits) {
    head(all_logits, m.ln.data(), n);
    for (int s = 0; s < n_seqs; ++s) {
      const float* row = all_logits + (seqs[s].row0 + seqs[s].n - 1) * m.V;
      std::copy(row, row + m.V, last[s]);
    }
  } else if (n_seqs == 1) {
    head(last[0], m.ln.data() + (seqs[0].row0 + seqs[0].n - 1) * C, 1);
  } else {
    for (int s = 0; s < n_seqs; ++s) {
      const float* row = m.ln.data() + (seqs[s].row0 + seqs[s].n - 1) * C;
      std::copy(row, row + C, m.last_ln.data() + s * C);
    }
    head(m.last_logits.data(), m.last_ln.data(), n_seqs);
    for (int s = 0; s < n_seqs; ++s)
      std::copy(m.last_logits.data() + s * m.V, m.last_logits.data() + (s + 1) * m.V, last[s]);
  }
  for (int s = 0; s < n_seqs; ++s) seqs[s].cache->advance(seqs[s].n);
}

}  // namespace hw::infer

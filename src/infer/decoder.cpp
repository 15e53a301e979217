// Cached decoding (decoder.hpp): the layer sequence of the training forward
// (model/layer_forward.hpp) over a chunk of rows, with the matrices read in the decoder's
// precision and layout, RoPE at the rows' original positions, and the attention of
// attn::CachedAttention against the KV cache; embeddings and the LM head around it.
#include "headwise/infer/decoder.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "headwise/attention/cached_attention.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/gemv.hpp"
#include "headwise/model/rope_freqs.hpp"
#include "model/layer_forward.hpp"
#include "model/model_impl.hpp"

namespace hw::infer {

WeightPrecision parse_weight_precision(const std::string& s) {
  if (s == "fp32") return WeightPrecision::FP32;
  if (s == "bf16") return WeightPrecision::BF16;
  if (s == "fp16") return WeightPrecision::FP16;
  fail("--weights: '" + s + "' is not a weight precision (fp32, bf16 or fp16)");
}

const char* weight_precision_name(WeightPrecision p) {
  return p == WeightPrecision::FP32 ? "fp32" : p == WeightPrecision::BF16 ? "bf16" : "fp16";
}

attn::KvPrecision kv_precision_for(WeightPrecision w, const std::string& given) {
  if (!given.empty()) return attn::parse_kv_precision(given);
  return w == WeightPrecision::FP32 ? attn::KvPrecision::FP32 : attn::KvPrecision::FP16;
}

namespace {

// The layer and which of its four matrices (layer_matrix_of) a parameter name is, and its fan-in
// and fan-out; false for any other name.
bool layer_matrix(const Model<float>& model, const std::string& name, int* layer, int* which, int64_t* in,
                  int64_t* out) {
  const ModelConfig& cfg = model.config();
  if (!layer_matrix_of(name, cfg.n_layer, layer, which)) return false;
  const auto& lay = model.layouts()[size_t(*layer)];
  const int64_t C = cfg.n_embd;
  const int64_t ins[4] = {C, lay.out_width(), C, cfg.intermediate()};
  const int64_t outs[4] = {lay.qkv_width(), C, cfg.fc_width(), C};
  *in = ins[*which];
  *out = outs[*which];
  return true;
}

}  // namespace

bool decoder_layer_matrix(const Model<float>& model, const std::string& name, int64_t* in, int64_t* out) {
  int l = 0, k = 0;
  return layer_matrix(model, name, &l, &k, in, out);
}

bool relay_out_in(const Model<float>& model, const std::string& name, float* values) {
  int64_t I = 0, O = 0;
  if (!decoder_layer_matrix(model, name, &I, &O)) return false;
  const std::vector<float> src(values, values + I * O);
  // Blocks of 32 x 32: both sides' lines are used whole while they sit in L1.
  constexpr int64_t B = 32;
#pragma omp parallel for schedule(static)
  for (int64_t o0 = 0; o0 < O; o0 += B)
    for (int64_t i0 = 0; i0 < I; i0 += B)
      for (int64_t o = o0; o < std::min(O, o0 + B); ++o)
        for (int64_t i = i0; i < std::min(I, i0 + B); ++i) values[o * I + i] = src[size_t(i * O + o)];
  return true;
}

bool HalfWeights::take(const Model<float>& model, WeightPrecision p, const std::string& name, const float* values) {
  check(p != WeightPrecision::FP32, "internal: HalfWeights::take with fp32");
  const ModelConfig& cfg = model.config();
  const cpu::HalfType t = p == WeightPrecision::BF16 ? cpu::HalfType::BF16 : cpu::HalfType::F16;
  const int64_t C = cfg.n_embd;
  if (!pool) {  // the head, then per layer QKV, output, MLP in, MLP out
    auto place = [this, at = int64_t(0)](int64_t n) mutable {
      offsets.push_back(at);
      at += (n + 31) / 32 * 32;
      return at;
    };
    int64_t total = place(C * cfg.vocab_size);
    for (int l = 0; l < cfg.n_layer; ++l) {
      const auto& lay = model.layouts()[size_t(l)];
      place(C * lay.qkv_width());
      place(lay.out_width() * C);
      place(C * cfg.fc_width());
      total = place(cfg.intermediate() * C);
    }
    pool = cpu::make_half_storage(total);
  }
  auto into = [&](int slot, const float* v, int64_t I, int64_t O, bool w_out_in) {
    return cpu::HalfMatrix::from_f32(v, I, O, w_out_in, t, pool, pool.get() + offsets[size_t(slot)]);
  };
  if (name == (cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight")) {
    head = into(0, values, C, cfg.vocab_size, /*w_out_in=*/true);
    return true;
  }
  int l = 0, k = 0;
  int64_t I = 0, O = 0;
  if (!layer_matrix(model, name, &l, &k, &I, &O)) return false;
  layers.resize(size_t(cfg.n_layer));
  HalfLayer& H = layers[size_t(l)];
  cpu::HalfMatrix* slot[4] = {&H.attn, &H.proj, &H.fc, &H.fcp};
  *slot[k] = into(1 + 4 * l + k, values, I, O, false);
  return true;
}


struct Decoder::Impl {
  int L = 0, C = 0, V = 0;
  int64_t chunk = 0;
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
  // chunk activations (all rows' logits go to the caller's buffer)
  std::vector<float> x, ln, qkv, att, r2, fch, fchg, r3, last;
};

Decoder::Decoder(const Model<float>& model, int64_t max_context, int64_t chunk, int64_t split_cols,
                 WeightPrecision weights, HalfWeights half, attn::KvPrecision kv, Fp32Layout layout)
    : model_(model),
      cache_(model.config().head_plan, model.config().n_head, model.config().kv_heads(), model.config().head_dim(),
             std::max<int64_t>(max_context, 1), kv) {
  const ModelConfig& cfg = model.config();
  check(model.ops().device() == Device::CPU,
        std::string("decoder: cached decoding runs on the CPU backend only; the model is on backend '") +
            model.ops().name() + "', which has no cached-attention (decode) kernels yet: load the checkpoint on the CPU");
  check(max_context >= 1 && max_context <= cfg.block_size,
        "decoder: max_context " + std::to_string(max_context) + " must be in 1..block_size (" +
            std::to_string(cfg.block_size) + ")");
  check(chunk >= 1, "decoder: chunk must be >= 1");
  check(split_cols >= 1, "decoder: split_cols must be >= 1");
  model.ensure_static_normalisers(max_context);  // the static heads' rows this decoder can reach
  // Adapters change the training forward's products (LoRA after QKV and the output); the
  // decoder's products are the plain matrices: refuse instead of decoding a different model.
  check(!cfg.lora.enabled(), "decoder: the model has LoRA adapters (model.lora), which cached decoding does not "
                             "apply: merge them into the weights first (Model::merge_adapters, headwise merge)");
  // The linearization baselines have no cached (recurrent) decode path yet: refuse them by name
  // instead of decoding without those heads.
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const attn::HeadSpec& s = cfg.head_plan.layers[size_t(l)][size_t(h)];
      check(!s.baseline_linear(), "decoder: layer " + std::to_string(l) + " head " + std::to_string(h) + " is '" +
                                      s.str() + "', a head kind cached decoding does not run (softmax, window, "
                                      "sink_window, static, linear and pruned heads only)");
    }
  check(layout == Fp32Layout::InOut || weights == WeightPrecision::FP32,
        "decoder: re-laid fp32 matrices (Fp32Layout::OutIn) with 16-bit weights");
  auto I = std::make_unique<Impl>();
  Impl& m = *I;
  m.L = cfg.n_layer;
  m.C = cfg.n_embd;
  m.V = cfg.vocab_size;
  m.chunk = std::min(chunk, max_context);
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
      const std::string head = cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight";
      half.take(model, weights, head, m.head);
      const float* mats[4];
      for (int l = 0; l < m.L; ++l) {
        const auto& W = m.w->layers[size_t(l)];
        mats[0] = W.attn_w, mats[1] = W.proj_w, mats[2] = W.fc_w, mats[3] = W.fcproj_w;
        for (int k = 0; k < 4; ++k)
          check(half.take(model, weights, layer_matrix_name(l, k), mats[k]), "internal: decoder matrix " +
                                                                                  layer_matrix_name(l, k));
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
  const auto rows = size_t(m.chunk);
  m.x.resize(rows * size_t(m.C));
  m.ln.resize(rows * size_t(m.C));
  m.qkv.resize(rows * size_t(std::max<int64_t>(max_qkv, 1)));
  m.att.resize(rows * size_t(std::max<int64_t>(max_out, 1)));
  m.r2.resize(rows * size_t(m.C));
  m.fch.resize(rows * size_t(m.family.fc));
  m.fchg.resize(rows * size_t(m.family.mlp));
  m.r3.resize(rows * size_t(m.C));
  m.last.resize(size_t(m.V));
  // (for `threads` = omp_get_max_threads() at construction: the attention region runs with
  // exactly that many)
  m.attention = std::make_unique<attn::CachedAttention>(cfg.head_plan, model.layouts(), head_params, cache_, m.chunk,
                                                        1, split_cols, std::max(1, omp_get_max_threads()));
  impl_ = I.release();
}

Decoder::~Decoder() { delete impl_; }

int Decoder::vocab_size() const { return impl_->V; }

size_t Decoder::scratch_bytes() const {
  const Impl& m = *impl_;
  size_t f = 0;
  for (const auto* v : {&m.x, &m.ln, &m.qkv, &m.att, &m.r2, &m.fch, &m.fchg, &m.r3, &m.last}) f += v->size();
  return (f + m.panel.size()) * sizeof(float) + m.attention->scratch_bytes();
}

size_t Decoder::half_weight_bytes() const {
  const Impl& m = *impl_;
  size_t n = size_t(m.head_h.size());
  for (const HalfLayer& W : m.layers_h) n += size_t(W.attn.size() + W.proj.size() + W.fc.size() + W.fcp.size());
  return n * sizeof(uint16_t);
}

size_t Decoder::weight_bytes_per_token() const {
  const Impl& m = *impl_;
  if (m.half) return half_weight_bytes();
  size_t n = size_t(m.V) * size_t(m.C);
  for (int l = 0; l < m.L; ++l) {
    const auto& lay = model_.layouts()[size_t(l)];
    n += size_t(m.C * lay.qkv_width() + lay.out_width() * m.C + m.C * m.family.fc + m.family.mlp * m.C);
  }
  return n * sizeof(float);
}

const float* Decoder::prefill(const int32_t* tokens, int64_t n, float* all_logits) {
  Impl& m = *impl_;
  // (Messages are built only on failure: a decode step allocates nothing.)
  if (n < 1) fail("decoder: nothing to feed (0 tokens)");
  if (cache_.length() + n > cache_.max_context())
    fail("decoder: " + std::to_string(cache_.length()) + " + " + std::to_string(n) +
         " tokens exceed the cache's context of " + std::to_string(cache_.max_context()));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= m.V)
      fail("decoder: token " + std::to_string(tokens[i]) + " at position " + std::to_string(cache_.length() + i) +
           " is outside the vocabulary of " + std::to_string(m.V));
  for (int64_t r0 = 0; r0 < n; r0 += m.chunk) {
    const int64_t rows = std::min(m.chunk, n - r0);
    run_rows(tokens + r0, rows, all_logits ? all_logits + r0 * m.V : nullptr);
  }
  return m.last.data();
}

namespace {

// The decoder's side of the layer sequence (layer_forward.hpp): products from the 16-bit copies
// or the model's fp32 matrices ([in, out], or re-laid [out, in]); RoPE from the rows' first
// position; the cached attention. No adapters, no dropout.
struct CachedStep {
  const Backend<float>& ops;
  const model_detail::LayerWeights<float>& W;
  const HalfLayer* H;  // null: fp32
  const attn::LayerLayout& lay;
  const model_detail::LayerFamily& fam;
  std::vector<float>& panel;
  const std::vector<double>& inv_freq;
  attn::CachedAttention& cached;
  attn::CachedRows rows;
  int l;
  bool out_in;

  void product(float* out, const float* in, const float* w, const cpu::HalfMatrix* wh, const float* bias, int64_t I,
               int64_t O) {
    if (wh)
      cpu::matmul_half(out, in, *wh, bias, rows.n, panel);
    else  // (one row: OpenBLAS GEMVs over the threads, matmul.cpp's row_gemv)
      ops.matmul_forward(out, in, w, bias, rows.n, I, O, out_in);
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
    ops.matmul_gelu_forward(pre, post, in, W.fc_w, W.fc_b, rows.n, fam.C, fam.mlp);
    return true;
  }
  // Rotate-half at each row's original position; the Q blocks then the K blocks are contiguous
  // from column 0.
  void rope(float* qkv) {
    if (!inv_freq.empty())
      cpu::rope_forward_freqs(qkv, 1, rows.n, lay.qkv_width(), 0, lay.n_q + lay.n_k, int(fam.D), inv_freq.data(),
                              rows.cache->length());
  }
  void attention(const float* qkv, float* att) { cached.run(l, &rows, 1, qkv, att); }
  void dropout(int, float*) {}
};

}  // namespace

void Decoder::run_rows(const int32_t* tokens, int64_t n, float* all_logits) {
  Impl& m = *impl_;
  const Backend<float>& ops = model_.ops();
  const int64_t C = m.C, c0 = cache_.length();
  const model_detail::Weights<float>& w = *m.w;
  for (int64_t r = 0; r < n; ++r) {
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
      const float* p = w.wpe + (c0 + r) * C;
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
    const bool last = l + 1 == m.L;
    model_detail::LayerRows<float, float> r;
    r.n = n;
    r.layout = &model_.layouts()[size_t(l)];
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
    r.next_w = last ? w.lnf_w : w.layers[size_t(l + 1)].ln1_w;
    r.next_b = last ? w.lnf_b : w.layers[size_t(l + 1)].ln1_b;
    r.q_norm = W.q_norm;
    r.k_norm = W.k_norm;
    CachedStep step{ops, W, m.half ? &m.layers_h[size_t(l)] : nullptr, *r.layout, m.family, m.panel, m.inv_freq,
                    *m.attention, attn::CachedRows{&cache_, 0, n}, l, m.out_in};
    model_detail::layer_forward_rows(ops, m.family, r, step);
    std::swap(x, r3);
  }
  // LM head (wte, or an untied lm_head) on the final norm's output.
  const cpu::HalfMatrix* head_h = m.half ? &m.head_h : nullptr;
  if (all_logits) {
    if (head_h) cpu::matmul_half(all_logits, m.ln.data(), *head_h, nullptr, n, m.panel);
    else ops.matmul_forward(all_logits, m.ln.data(), m.head, nullptr, n, C, m.V, /*w_out_in=*/true);
    std::copy(all_logits + (n - 1) * m.V, all_logits + n * m.V, m.last.data());
  } else {
    const float* row = m.ln.data() + (n - 1) * C;
    if (head_h) cpu::matmul_half(m.last.data(), row, *head_h, nullptr, 1, m.panel);
    else ops.matmul_forward(m.last.data(), row, m.head, nullptr, 1, C, m.V, /*w_out_in=*/true);
  }
  cache_.advance(n);
}

}  // namespace hw::infer

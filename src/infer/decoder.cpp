// Cached decoding (decoder.hpp). The attention of n rows (positions c0 .. c0+n-1) reads the
// cache as it was before the rows (positions < c0) and the rows' own K/V from the QKV buffer,
// then the rows are written into the cache: a ring row overwritten by the chunk was never needed
// by its rows (row i >= c0 needs (i - W, c0) of the cache, which the ring still holds at c0).
#include "headwise/infer/decoder.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include "attention/tile_ops.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/gemv.hpp"
#include "headwise/kernels/kv_rows.hpp"
#include "headwise/model/rope_freqs.hpp"

namespace hw::infer {
namespace {

using attn::HeadKind;
using attn::detail::exp_or_zero;
using attn::detail::gemm_rm;

constexpr int kMaxTasks = 1024;  // attention tasks of one layer: query heads + KV heads

// A decode step's task: one softmax-family head's virtual columns [lo, hi) (its cache segments,
// then the row's own key), written as part `part` of the split buffers; or a whole head (static;
// or softmax-family in a prefill, part = -1); or a KV head's linear state (h = -(g + 1)).
struct AttnTask {
  int h = 0;
  int part = -1;
  int64_t lo = 0, hi = 0;
};

const float* find_f32(const Arena& a, const std::string& name, bool required, std::set<std::string>* read = nullptr) {
  const Tensor* t = a.find(name);
  check(t != nullptr || !required, "decoder: the model has no tensor " + name);
  if (t && read) read->insert(name);
  return t ? t->f32() : nullptr;
}

struct LayerW {
  const float *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcp_w, *fcp_b;
  const float *q_norm = nullptr, *k_norm = nullptr;
};

struct StaticW {
  const float *alpha = nullptr, *rho = nullptr, *log_z = nullptr;
};

// The query side of a linear head's kernel (LinearWs in src/attention/linear_head.cpp, same
// float arithmetic): psi_0 = a0, psi_{1+r} = lin[r] q_r, psi_{1+D+k} = wp[k] q_r q_c (r <= c).
struct LinearQ {
  float a0 = 0.f;
  std::vector<float> lin, wp;
};

LinearQ linear_query_side(const float* Lp, const int32_t* grp, int G, int D, double eps_d) {
  const int G1 = G + 1;
  std::vector<float> Ll(size_t(G1 * G1), 0.f), M(size_t(G1 * G1), 0.f);
  for (int a = 0; a < G1; ++a)
    for (int b = 0; b <= a; ++b) Ll[size_t(a * G1 + b)] = Lp[a * G1 + b];
  for (int a = 0; a < G1; ++a)
    for (int b = 0; b < G1; ++b) {
      float m = 0.f;
      for (int c = 0; c <= std::min(a, b); ++c) m += Ll[size_t(a * G1 + c)] * Ll[size_t(b * G1 + c)];
      M[size_t(a * G1 + b)] = m;
    }
  const float rs = 1.f / std::sqrt(float(D)), inv_d = rs * rs;
  LinearQ q;
  q.a0 = float(eps_d) + M[0];
  q.lin.resize(size_t(D));
  for (int r = 0; r < D; ++r) q.lin[size_t(r)] = 2.f * M[size_t(grp[r])] * rs;
  for (int r = 0; r < D; ++r)
    for (int c = r; c < D; ++c)
      q.wp.push_back((r == c ? 1.f : 2.f) * M[size_t(grp[r] * G1 + grp[c])] * inv_d);
  return q;
}

}  // namespace

WeightPrecision parse_weight_precision(const std::string& s) {
  if (s == "fp32") return WeightPrecision::FP32;
  if (s == "bf16") return WeightPrecision::BF16;
  if (s == "fp16") return WeightPrecision::FP16;
  fail("--weights: '" + s + "' is not a weight precision (fp32, bf16 or fp16)");
}

const char* weight_precision_name(WeightPrecision p) {
  return p == WeightPrecision::FP32 ? "fp32" : p == WeightPrecision::BF16 ? "bf16" : "fp16";
}

KvPrecision kv_precision_for(WeightPrecision w, const std::string& given) {
  if (!given.empty()) return parse_kv_precision(given);
  return w == WeightPrecision::FP32 ? KvPrecision::FP32 : KvPrecision::FP16;
}

namespace {

// The layer and which of its four (0 QKV, 1 output, 2 MLP in, 3 MLP out) a parameter name is, and
// its fan-in and fan-out; false for any other name.
bool layer_matrix(const Model<float>& model, const std::string& name, int* layer, int* which, int64_t* in,
                  int64_t* out) {
  const ModelConfig& cfg = model.config();
  if (name.rfind("h.", 0) != 0) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return false;
  const std::string num = name.substr(2, dot - 2);
  if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos) return false;
  const int l = std::stoi(num);
  if (l >= cfg.n_layer || std::to_string(l) != num) return false;
  const auto& lay = model.layouts()[size_t(l)];
  const std::string rest = name.substr(dot + 1);
  const int64_t C = cfg.n_embd;
  if (rest == "attn.c_attn.weight") *which = 0, *in = C, *out = lay.qkv_width();
  else if (rest == "attn.c_proj.weight") *which = 1, *in = lay.out_width(), *out = C;
  else if (rest == "mlp.c_fc.weight") *which = 2, *in = C, *out = cfg.fc_width();
  else if (rest == "mlp.c_proj.weight") *which = 3, *in = cfg.intermediate(), *out = C;
  else return false;
  *layer = l;
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
  int L = 0, H = 0, KV = 0, D = 0, C = 0, V = 0;
  int64_t chunk = 0, max_cols = 0, Fw = 0, mlp = 0, fc = 0;  // MLP width, first MLP matrix's columns
  bool rope = false, rmsnorm = false, swiglu = false;
  std::vector<double> inv_freq;  // rotary frequencies (rope_freqs.hpp)
  double eps = 0;
  const float *wte = nullptr, *wpe = nullptr, *lnf_w = nullptr, *lnf_b = nullptr;
  const float* head = nullptr;  // the LM head: wte, or an untied lm_head
  bool half = false;            // matrices read as 16-bit copies (layers_h, head_h)
  bool out_in = false;          // fp32 layer matrices re-laid [out, in] (Fp32Layout::OutIn)
  std::vector<HalfLayer> layers_h;
  cpu::HalfMatrix head_h;
  std::vector<float> panel;     // a prefill's widened weight panel (cpu::matmul_half), sized once
  std::vector<LayerW> layers;
  std::vector<std::vector<StaticW>> statics;   // [l][h]
  std::vector<std::vector<LinearQ>> linears;   // [l][h]
  // chunk activations
  std::vector<float> x, ln, qkv, att, r2, fch, fchg, r3, last;  // (all rows' logits go to the caller's buffer)
  std::vector<int64_t> pos;
  // per-thread attention scratch (for `threads` = omp_get_max_threads() at construction; the
  // attention region runs with exactly that many): scores [chunk x max_cols], column positions,
  // psi, acc, row sums
  int threads = 1;
  std::vector<float> scores, psi, acc, rowsum;
  std::vector<int64_t> colpos;
  // A 16-bit cache's rows of one head widened for a prefill's products ([max slots x D] per thread).
  std::vector<float> widened;
  // Decode (one row) splits each softmax-family head's columns into parts of split_cols, merged
  // afterwards by their maxima and sums: per part D outputs, a max and a sum.
  int64_t split_cols = 0;
  std::vector<AttnTask> tasks;  // capacity fixed by the constructor (no allocation per call)
  std::vector<float> part_out, part_max, part_sum;
  std::vector<int> head_part0, head_parts;  // per query head: first part, number of parts
};

Decoder::Decoder(const Model<float>& model, int64_t max_context, int64_t chunk, int64_t split_cols,
                 WeightPrecision weights, HalfWeights half, KvPrecision kv, Fp32Layout layout)
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
  check(cfg.n_head + cfg.kv_heads() <= kMaxTasks, "decoder: more than " + std::to_string(kMaxTasks) +
                                                      " query + KV heads in a layer");
  auto I = std::make_unique<Impl>();
  Impl& m = *I;
  m.L = cfg.n_layer;
  m.H = cfg.n_head;
  m.KV = cfg.kv_heads();
  m.D = cfg.head_dim();
  m.C = cfg.n_embd;
  m.V = cfg.vocab_size;
  m.chunk = std::min(chunk, max_context);
  m.rope = cfg.rope();
  m.rmsnorm = cfg.rmsnorm();
  m.swiglu = cfg.swiglu();
  m.mlp = cfg.intermediate();
  m.fc = cfg.fc_width();
  if (m.rope) m.inv_freq = rope_inv_freq(cfg);
  m.eps = cfg.layer_norm_epsilon;
  m.Fw = linear_features(m.D);
  check(layout == Fp32Layout::InOut || weights == WeightPrecision::FP32,
        "decoder: re-laid fp32 matrices (Fp32Layout::OutIn) with 16-bit weights");
  m.out_in = layout == Fp32Layout::OutIn;
  const Arena& P = model.params();
  std::set<std::string> read;  // every parameter tensor the decoder reads
  const Arena& B = model.buffers();
  m.wte = find_f32(P, "wte.weight", true, &read);
  m.wpe = m.rope ? nullptr : find_f32(P, "wpe.weight", true, &read);
  const bool ln = !cfg.rmsnorm();
  m.lnf_w = find_f32(P, "ln_f.weight", true, &read);
  m.lnf_b = find_f32(P, "ln_f.bias", ln, &read);
  m.head = cfg.tie_word_embeddings ? m.wte : find_f32(P, "lm_head.weight", true, &read);
  int64_t max_qkv = 0, max_out = 0, max_slots = 0;
  for (int l = 0; l < m.L; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    m.layers.push_back({find_f32(P, p + "ln_1.weight", true, &read), find_f32(P, p + "ln_1.bias", ln, &read),
                        find_f32(P, p + "attn.c_attn.weight", true, &read),
                        find_f32(P, p + "attn.c_attn.bias", cfg.has_qkv_bias(), &read),
                        find_f32(P, p + "attn.c_proj.weight", true, &read),
                        find_f32(P, p + "attn.c_proj.bias", cfg.has_out_bias(), &read),
                        find_f32(P, p + "ln_2.weight", true, &read), find_f32(P, p + "ln_2.bias", ln, &read),
                        find_f32(P, p + "mlp.c_fc.weight", true, &read),
                        find_f32(P, p + "mlp.c_fc.bias", cfg.has_mlp_bias(), &read),
                        find_f32(P, p + "mlp.c_proj.weight", true, &read),
                        find_f32(P, p + "mlp.c_proj.bias", cfg.has_mlp_bias(), &read),
                        find_f32(P, p + "attn.q_norm.weight", cfg.qk_norm, &read),
                        find_f32(P, p + "attn.k_norm.weight", cfg.qk_norm, &read)});
    const auto& lay = model.layouts()[size_t(l)];
    max_qkv = std::max(max_qkv, lay.qkv_width());
    max_out = std::max(max_out, lay.out_width());
    m.statics.emplace_back(size_t(m.H));
    m.linears.emplace_back(size_t(m.H));
    for (int h = 0; h < m.H; ++h) {
      const auto& spec = cfg.head_plan.layers[size_t(l)][size_t(h)];
      const std::string hp = p + "attn.";
      if (spec.kind == HeadKind::Static) {
        const std::string sp = hp + "static." + std::to_string(h) + ".";
        m.statics[size_t(l)][size_t(h)] = {find_f32(B, sp + "alpha", true), find_f32(B, sp + "rho", true),
                                           find_f32(B, sp + "log_z", true)};
      } else if (spec.kind == HeadKind::Linear) {
        const std::string lp = hp + "linear." + std::to_string(h) + ".";
        const Tensor* Lt = P.find(lp + "L");
        read.insert(lp + "L");
        const Tensor* gt = B.find(lp + "groups");
        check(Lt != nullptr && gt != nullptr, "decoder: the model has no tensor " + lp + "L or " + lp + "groups");
        // The model checked its groups; the decoder indexes L with them on its own, so again here
        // (and G <= head_dim bounds linear_query_side's O(G^3)).
        const std::string who = "decoder: layer " + std::to_string(l) + " linear head " + std::to_string(h);
        check(Lt->rank() == 2 && Lt->dim(0) == Lt->dim(1) && gt->numel() == m.D, who + ": L or groups has a wrong shape");
        const int G = int(std::min<int64_t>(Lt->dim(0) - 1, m.D + 1));
        attn::check_linear_groups(gt->i32(), m.D, G, who);
        m.linears[size_t(l)][size_t(h)] = linear_query_side(Lt->f32(), gt->i32(), G, m.D, cfg.linear_eps);
      }
    }
    for (int g = 0; g < m.KV; ++g) max_slots = std::max(max_slots, cache_.policy(l, g).slots);
  }
  if (weights != WeightPrecision::FP32) {
    m.half = true;
    if (half.empty()) {  // round the model's own
      const std::string head = cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight";
      half.take(model, weights, head, find_f32(P, head, true));
      for (int l = 0; l < m.L; ++l)
        for (const char* w : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
          const std::string n = "h." + std::to_string(l) + "." + w;
          check(half.take(model, weights, n, find_f32(P, n, true)), "internal: decoder matrix " + n);
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
                W.fc.I == m.C && W.fc.O == m.fc && W.fcp.I == m.mlp && W.fcp.O == m.C,
            "decoder: layer " + std::to_string(l) + "'s 16-bit matrices do not match the model's shapes");
      widest = std::max({widest, lay.out_width(), m.mlp});
    }
    m.layers_h = std::move(half.layers);
    m.head_h = std::move(half.head);
    m.panel.resize(size_t(cpu::kPanelRows * widest));
  }
  // A parameter the decoder does not read (an adapter, say) would change the training forward but
  // not the decode: refuse instead of decoding a different model.
  for (const auto& t : P.tensors())
    check(read.count(t->name) > 0, "decoder: the model has parameter " + t->name +
                                       ", which cached decoding does not read (merge adapters into the weights first)");
  m.max_cols = max_slots + m.chunk;
  const auto rows = size_t(m.chunk);
  m.x.resize(rows * size_t(m.C));
  m.ln.resize(rows * size_t(m.C));
  m.qkv.resize(rows * size_t(std::max<int64_t>(max_qkv, 1)));
  m.att.resize(rows * size_t(std::max<int64_t>(max_out, 1)));
  m.r2.resize(rows * size_t(m.C));
  m.fch.resize(rows * size_t(m.fc));
  m.fchg.resize(rows * size_t(m.mlp));
  m.r3.resize(rows * size_t(m.C));
  m.last.resize(size_t(m.V));
  m.pos.resize(rows);
  m.threads = std::max(1, omp_get_max_threads());
  m.scores.resize(size_t(m.threads) * rows * size_t(m.max_cols));
  m.colpos.resize(size_t(m.threads) * size_t(m.max_cols));
  m.psi.resize(size_t(m.threads) * size_t(m.Fw));
  m.acc.resize(size_t(m.threads) * size_t(m.D + 1));
  m.rowsum.resize(size_t(m.threads) * rows);
  if (cache_.half()) m.widened.resize(size_t(m.threads) * size_t(max_slots) * size_t(m.D));
  m.split_cols = split_cols;
  const int64_t max_parts = m.H * ((max_slots + 1 + split_cols - 1) / split_cols);
  m.tasks.reserve(size_t(max_parts + m.H + m.KV));
  m.part_out.resize(size_t(max_parts * m.D));
  m.part_max.resize(size_t(max_parts));
  m.part_sum.resize(size_t(max_parts));
  m.head_part0.resize(size_t(m.H));
  m.head_parts.resize(size_t(m.H));
  impl_ = I.release();
}

Decoder::~Decoder() { delete impl_; }

int Decoder::vocab_size() const { return impl_->V; }

size_t Decoder::scratch_bytes() const {
  const Impl& m = *impl_;
  size_t f = 0;
  for (const auto* v : {&m.x, &m.ln, &m.qkv, &m.att, &m.r2, &m.fch, &m.fchg, &m.r3, &m.last, &m.scores,
                        &m.psi, &m.acc, &m.rowsum, &m.part_out, &m.part_max, &m.part_sum, &m.widened})
    f += v->size();
  return (f + m.panel.size()) * sizeof(float) + (m.pos.size() + m.colpos.size()) * sizeof(int64_t);
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
    n += size_t(m.C * lay.qkv_width() + lay.out_width() * m.C + m.C * m.fc + m.mlp * m.C);
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

void Decoder::run_rows(const int32_t* tokens, int64_t n, float* all_logits) {
  Impl& m = *impl_;
  const Backend<float>& ops = model_.ops();
  const int64_t C = m.C, c0 = cache_.length();
  for (int64_t r = 0; r < n; ++r) {
    m.pos[size_t(r)] = c0 + r;
    float* y = m.x.data() + r * C;
    if (m.half && m.head == m.wte) {  // tied: the embedding is the LM head's 16-bit row
      const uint16_t* e = m.head_h.w + int64_t(tokens[r]) * C;
      if (m.head_h.type == cpu::HalfType::BF16)
        for (int64_t c = 0; c < C; ++c) y[c] = cpu::bf16_to_float(e[c]);
      else
        for (int64_t c = 0; c < C; ++c) y[c] = cpu::f16_to_float(e[c]);
    } else {
      const float* e = m.wte + int64_t(tokens[r]) * C;
      std::copy(e, e + C, y);
    }
    if (m.wpe) {
      const float* p = m.wpe + (c0 + r) * C;
      for (int64_t c = 0; c < C; ++c) y[c] += p[c];
    }
  }
  float* x = m.x.data();
  float* r3 = m.r3.data();
  // The model's norm (gpt.cpp's norm_forward without saved statistics), after a residual sum.
  auto norm = [&](const float* in, const float* w, const float* b) {
    if (m.rmsnorm)
      ops.rmsnorm_forward(m.ln.data(), C, nullptr, in, C, w, n, 1, C, m.eps);
    else
      ops.layernorm_forward(m.ln.data(), nullptr, nullptr, in, w, b, n, C, m.eps);
  };
  auto residual_norm = [&](float* resid, const float* a, const float* b, const float* w, const float* bias) {
    if (m.rmsnorm) {
      ops.residual_forward(resid, a, b, n * C);
      ops.rmsnorm_forward(m.ln.data(), C, nullptr, resid, C, w, n, 1, C, m.eps);
    } else {
      ops.residual_layernorm_forward(resid, m.ln.data(), nullptr, nullptr, a, b, w, bias, n, C, m.eps);
    }
  };
  // x W (+ bias) for `rows` rows: the 16-bit copies, or the model's fp32 (w_out_in: the LM head,
  // or a layer matrix re-laid by relay_out_in).
  auto linear = [&](float* out, const float* in, const float* w, const cpu::HalfMatrix* wh, const float* bias,
                    int64_t rows, int64_t I, int64_t O, bool w_out_in) {
    if (wh)
      cpu::matmul_half(out, in, *wh, bias, rows, m.panel);
    else  // (one row: OpenBLAS GEMVs over the threads, matmul.cpp's row_gemv)
      ops.matmul_forward(out, in, w, bias, rows, I, O, w_out_in);
  };
  if (m.L > 0)
    norm(x, m.layers[0].ln1_w, m.layers[0].ln1_b);
  else
    norm(x, m.lnf_w, m.lnf_b);
  for (int l = 0; l < m.L; ++l) {
    const LayerW& W = m.layers[size_t(l)];
    const auto& lay = model_.layouts()[size_t(l)];
    const int64_t ldx = lay.qkv_width();
    const HalfLayer* H = m.half ? &m.layers_h[size_t(l)] : nullptr;
    linear(m.qkv.data(), m.ln.data(), W.attn_w, H ? &H->attn : nullptr, W.attn_b, n, C, ldx, m.out_in);
    if (W.q_norm) {  // q/k norm (Qwen3) in place, before RoPE
      const int64_t nq = int64_t(lay.n_q) * m.D;
      ops.rmsnorm_forward(m.qkv.data(), ldx, nullptr, m.qkv.data(), ldx, W.q_norm, n, lay.n_q, m.D, m.eps);
      ops.rmsnorm_forward(m.qkv.data() + nq, ldx, nullptr, m.qkv.data() + nq, ldx, W.k_norm, n, lay.n_k, m.D, m.eps);
    }
    // Rotate-half at each row's original position; the Q blocks then the K blocks are contiguous
    // from column 0.
    if (m.rope) cpu::rope_forward_freqs(m.qkv.data(), 1, n, ldx, 0, lay.n_q + lay.n_k, m.D, m.inv_freq.data(), c0);
    attention(l, n);
    linear(m.r2.data(), m.att.data(), W.proj_w, H ? &H->proj : nullptr, W.proj_b, n, lay.out_width(), C, m.out_in);
    residual_norm(m.r2.data(), m.r2.data(), x, W.ln2_w, W.ln2_b);
    if (m.swiglu) {
      linear(m.fch.data(), m.ln.data(), W.fc_w, H ? &H->fc : nullptr, W.fc_b, n, C, m.fc, m.out_in);
      ops.swiglu_forward(m.fchg.data(), m.fch.data(), n, m.mlp);
    } else if (m.half || m.out_in) {
      linear(m.fch.data(), m.ln.data(), W.fc_w, H ? &H->fc : nullptr, W.fc_b, n, C, m.mlp, m.out_in);
      ops.gelu_forward(m.fchg.data(), m.fch.data(), n * m.mlp);
    } else {
      ops.matmul_gelu_forward(m.fch.data(), m.fchg.data(), m.ln.data(), W.fc_w, W.fc_b, n, C, m.mlp);
    }
    linear(r3, m.fchg.data(), W.fcp_w, H ? &H->fcp : nullptr, W.fcp_b, n, m.mlp, C, m.out_in);
    const float* nw = l + 1 < m.L ? m.layers[size_t(l + 1)].ln1_w : m.lnf_w;
    const float* nb = l + 1 < m.L ? m.layers[size_t(l + 1)].ln1_b : m.lnf_b;
    residual_norm(r3, r3, m.r2.data(), nw, nb);
    std::swap(x, r3);
  }
  // LM head (wte, or an untied lm_head) on the final norm's output.
  if (all_logits) {
    linear(all_logits, m.ln.data(), m.head, m.half ? &m.head_h : nullptr, nullptr, n, C, m.V, /*w_out_in=*/true);
    std::copy(all_logits + (n - 1) * m.V, all_logits + n * m.V, m.last.data());
  } else {
    linear(m.last.data(), m.ln.data() + (n - 1) * C, m.head, m.half ? &m.head_h : nullptr, nullptr, 1, C, m.V, /*w_out_in=*/true);
  }
  cache_.advance(n);
}

int Decoder::head_segments(int l, int h, int64_t c0, int64_t seg[2][2]) const {
  const attn::HeadSpec& spec = model_.config().head_plan.layers[size_t(l)][size_t(h)];
  const int g = h / (impl_->H / impl_->KV);
  // All valid slots, except a window head on an All store (slot = position), which reads only
  // the sink and the window's reach.
  int n_seg = 0;
  auto add_seg = [&](int64_t lo, int64_t hi) {
    if (hi > lo) seg[n_seg][0] = lo, seg[n_seg][1] = hi, ++n_seg;
  };
  if (cache_.policy(l, g).rows == Rows::SinkRing || spec.kind == HeadKind::Static || spec.kind == HeadKind::Softmax) {
    add_seg(0, cache_.valid_slots(l, g, c0));
  } else {
    const int64_t sink_hi = std::min<int64_t>(spec.kind == HeadKind::SinkWindow ? spec.sink : 0, c0);
    const int64_t win_lo = std::max<int64_t>(0, c0 - spec.window + 1);
    if (win_lo <= sink_hi) {
      add_seg(0, c0);
    } else {
      add_seg(0, sink_hi);
      add_seg(win_lo, c0);
    }
  }
  return n_seg;
}

// One part of a decode step's softmax-family head: virtual columns [lo, hi) of its cache
// segments followed by the row's own key. Writes the part's max, sum of e^(s - max) and
// unnormalised output sum e^(s - max) v.
void Decoder::decode_part(int l, int h, int part, int64_t lo, int64_t hi, float* S, int64_t* cp) {
  Impl& m = *impl_;
  const auto& lay = model_.layouts()[size_t(l)];
  const attn::HeadSpec& spec = model_.config().head_plan.layers[size_t(l)][size_t(h)];
  const int D = m.D, g = h / (m.H / m.KV);
  const int64_t c0 = cache_.length(), len = hi - lo;
  const float scale = 1.f / std::sqrt(float(D));
  const float* q = m.qkv.data() + lay.q_col(h);
  const bool bounded = spec.kind != HeadKind::Softmax;
  int64_t seg[2][2];
  const int n_seg = head_segments(l, h, c0, seg);
  // Scores of the cached keys in [lo, hi), piece by piece (a part may straddle two segments).
  int64_t voff = 0;
  for (int s = 0; s < n_seg; ++s) {
    const int64_t seg_len = seg[s][1] - seg[s][0];
    const int64_t a = std::max(lo, voff), b = std::min(hi, voff + seg_len);
    if (a < b) {
      const int64_t slot0 = seg[s][0] + (a - voff);
      if (cache_.half())
        cpu::kv_dot_rows(S + (a - lo), q, cache_.k_row16(l, g, slot0), b - a, D, cache_.half_type(), scale);
      else
        cpu::kv_dot_rows(S + (a - lo), q, cache_.k_row(l, g, slot0), b - a, D, scale);
      if (bounded)
        for (int64_t c = a; c < b; ++c) cp[c - lo] = cache_.position_of(l, g, slot0 + (c - a), c0);
    }
    voff += seg_len;
  }
  const bool own = hi == voff + 1;  // the last column is the row's own key
  if (own) {
    const float* k = m.qkv.data() + lay.k_col(g);
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot += q[d] * k[d];
    S[len - 1] = scale * dot;
    cp[len - 1] = c0;
  }
  // Mask (a bounded head sees j < sink or j > c0 - window; every cached j < c0), max, e^(s - max).
  float mx = -std::numeric_limits<float>::infinity();
  if (bounded) {
    const int64_t sink = spec.kind == HeadKind::SinkWindow ? spec.sink : 0;
    for (int64_t c = 0; c < len; ++c) {
      const int64_t j = cp[c];
      if (j < sink || j > c0 - spec.window) mx = std::max(mx, S[c]);
      else S[c] = -std::numeric_limits<float>::infinity();
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < len; ++c) mx = std::max(mx, S[c]);
  }
  float* o = m.part_out.data() + size_t(part) * size_t(D);
  m.part_max[size_t(part)] = mx;
  if (mx == -std::numeric_limits<float>::infinity()) {  // nothing visible in this part
    m.part_sum[size_t(part)] = 0.f;
    return;
  }
  // (Vectorized: a step over 8K keys computes ~1.2M of these exps, as many as it reads values.)
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < len; ++c) {
    const float p = exp_or_zero(S[c] - mx);
    S[c] = p;
    sum += p;
  }
  m.part_sum[size_t(part)] = sum;
  // o = sum_c p_c v_c over the same pieces.
  std::fill(o, o + D, 0.f);
  voff = 0;
  for (int s = 0; s < n_seg; ++s) {
    const int64_t seg_len = seg[s][1] - seg[s][0];
    const int64_t a = std::max(lo, voff), b = std::min(hi, voff + seg_len);
    const int64_t slot0 = seg[s][0] + (a - voff);
    if (a < b && cache_.half())
      cpu::kv_axpy_rows(o, S + (a - lo), cache_.v_row16(l, g, slot0), b - a, D, cache_.half_type());
    else if (a < b)
      cpu::kv_axpy_rows(o, S + (a - lo), cache_.v_row(l, g, slot0), b - a, D);
    voff += seg_len;
  }
  if (own) {
    const float* v = m.qkv.data() + lay.v_col(g);
    const float p = S[len - 1];
    for (int d = 0; d < D; ++d) o[d] += p * v[d];
  }
}

void Decoder::attention(int l, int64_t n) {
  Impl& m = *impl_;
  const auto& lay = model_.layouts()[size_t(l)];
  const auto& plan = model_.config().head_plan.layers[size_t(l)];
  const int D = m.D, per = m.H / m.KV;
  const int64_t ldx = lay.qkv_width(), ldo = lay.out_width(), c0 = cache_.length(), ldS = m.max_cols;
  const float scale = 1.f / std::sqrt(float(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const float* qkv = m.qkv.data();
  float* att = m.att.data();
  // Tasks: each static query head; each softmax-family query head, whole in a prefill and in
  // parts of split_cols columns in a decode step; each KV head with a linear state (its linear
  // query heads run row by row with the state). The task list's capacity is fixed.
  const bool split = n == 1;
  m.tasks.clear();
  int n_parts = 0;
  for (int h = 0; h < m.H; ++h) {
    const attn::HeadSpec& spec = plan[size_t(h)];
    if (split && spec.softmax_family()) {
      int64_t seg[2][2];
      const int n_seg = head_segments(l, h, c0, seg);
      int64_t ncols = 1;  // the row's own key
      for (int s = 0; s < n_seg; ++s) ncols += seg[s][1] - seg[s][0];
      m.head_part0[size_t(h)] = n_parts;
      m.head_parts[size_t(h)] = int((ncols + m.split_cols - 1) / m.split_cols);
      for (int64_t lo = 0; lo < ncols; lo += m.split_cols)
        m.tasks.push_back({h, n_parts++, lo, std::min(ncols, lo + m.split_cols)});
    } else if (spec.softmax_family() || spec.kind == HeadKind::Static) {
      m.tasks.push_back({h, -1, 0, 0});
    }
  }
  for (int g = 0; g < m.KV; ++g)
    if (cache_.policy(l, g).linear_state) m.tasks.push_back({-(g + 1), -1, 0, 0});
  const int n_tasks = int(m.tasks.size());
  int failed = 0;
  ParallelErrors errors;
  {
    const attn::detail::BlasSingleThreaded blas_on_calling_thread;  // tasks are the parallel dimension
#pragma omp parallel for schedule(dynamic, 1) num_threads(m.threads) if (n_tasks > 1)
    for (int t = 0; t < n_tasks; ++t) errors.run([&] {
      const int tid = omp_get_thread_num();
      float* S = m.scores.data() + size_t(tid) * size_t(m.chunk) * size_t(ldS);
      int64_t* cp = m.colpos.data() + size_t(tid) * size_t(ldS);
      float* rowsum = m.rowsum.data() + size_t(tid) * size_t(m.chunk);
      const AttnTask task = m.tasks[size_t(t)];
      // fp32 rows [slot0, slot0 + len) of KV head g's K or V: the cache's own, or a 16-bit
      // cache's widened into this thread's scratch (an fp32 cache has none: no pointer into an
      // empty buffer, which UBSan reports as an offset applied to null).
      float* widened =
          cache_.half() ? m.widened.data() + size_t(tid) * size_t(m.max_cols - m.chunk) * size_t(D) : nullptr;
      auto cache_rows = [&](bool k, int g, int64_t slot0, int64_t len) -> const float* {
        if (!cache_.half()) return k ? cache_.k_row(l, g, slot0) : cache_.v_row(l, g, slot0);
        cpu::kv_widen_rows(widened, k ? cache_.k_row16(l, g, slot0) : cache_.v_row16(l, g, slot0), len * D,
                           cache_.half_type());
        return widened;
      };
      if (task.part >= 0) {
        decode_part(l, task.h, task.part, task.lo, task.hi, S, cp);
      } else if (task.h >= 0) {
        const int h = task.h, g = h / per;
        const attn::HeadSpec& spec = plan[size_t(h)];
        const bool is_static = spec.kind == HeadKind::Static;
        int64_t seg[2][2];
        const int n_seg = head_segments(l, h, c0, seg);
        int64_t ncols = 0;
        for (int s = 0; s < n_seg; ++s)
          for (int64_t sl = seg[s][0]; sl < seg[s][1]; ++sl) cp[ncols++] = cache_.position_of(l, g, sl, c0);
        const int64_t cache_cols = ncols;
        for (int64_t r = 0; r < n; ++r) cp[ncols++] = c0 + r;
        float* out = att + lay.out_col(h);
        if (is_static) {  // P(i,j) = exp(alpha_j + rho_{i-j} - log_z_i), already normalised
          const StaticW& sw = m.statics[size_t(l)][size_t(h)];
          for (int64_t r = 0; r < n; ++r) {
            const int64_t i = c0 + r;
            float* row = S + r * ldS;
            for (int64_t c = 0; c < ncols; ++c) {
              const int64_t j = cp[c];
              row[c] = j <= i ? exp_or_zero(sw.alpha[j] + sw.rho[i - j] - sw.log_z[i]) : 0.f;
            }
            rowsum[r] = 1.f;
          }
        } else {
          const float* q = qkv + lay.q_col(h);
          int64_t off = 0;
          for (int s = 0; s < n_seg; ++s) {
            const int64_t len = seg[s][1] - seg[s][0];
            gemm_rm(false, true, int(n), int(len), D, scale, q, ldx, cache_rows(true, g, seg[s][0], len), D, 0.f,
                    S + off, ldS);
            off += len;
          }
          gemm_rm(false, true, int(n), int(n), D, scale, q, ldx, qkv + lay.k_col(g), ldx, 0.f, S + cache_cols, ldS);
          const bool bounded = spec.kind != HeadKind::Softmax;
          const int64_t sink = spec.kind == HeadKind::SinkWindow ? spec.sink : 0, window = spec.window;
          for (int64_t r = 0; r < n; ++r) {
            const int64_t i = c0 + r;
            float* row = S + r * ldS;
            float mx = neg_inf;
            for (int64_t c = 0; c < ncols; ++c) {
              const int64_t j = cp[c];
              const bool vis = j <= i && (!bounded || j < sink || j > i - window);
              if (vis) mx = std::max(mx, row[c]);
              else row[c] = neg_inf;
            }
            float sum = 0.f;
#pragma omp simd reduction(+ : sum)
            for (int64_t c = 0; c < ncols; ++c) {
              const float p = exp_or_zero(row[c] - mx);  // masked: -inf -> 0
              row[c] = p;
              sum += p;
            }
            rowsum[r] = sum;
          }
        }
        // out = P V over the same columns: the cache segments, then the rows' own V.
        int64_t off = 0;
        float beta = 0.f;
        for (int s = 0; s < n_seg; ++s) {
          const int64_t len = seg[s][1] - seg[s][0];
          gemm_rm(false, false, int(n), D, int(len), 1.f, S + off, ldS, cache_rows(false, g, seg[s][0], len), D, beta,
                  out, ldo);
          off += len;
          beta = 1.f;
        }
        gemm_rm(false, false, int(n), D, int(n), 1.f, S + cache_cols, ldS, qkv + lay.v_col(g), ldx, beta, out, ldo);
        if (!is_static)
          for (int64_t r = 0; r < n; ++r) {
            const float inv = 1.f / rowsum[r];
            float* o = out + r * ldo;
            for (int d = 0; d < D; ++d) o[d] *= inv;
          }
      } else {  // linear heads of KV head g: add each row to the prefix state, then read it
        const int g = -task.h - 1;
        float* St = cache_.linear_state(l, g);
        float* psi = m.psi.data() + size_t(tid) * size_t(m.Fw);
        float* acc = m.acc.data() + size_t(tid) * size_t(D + 1);
        const int D1 = D + 1;
        const int64_t P = m.Fw - 1 - D;
        for (int64_t r = 0; r < n; ++r) {
          const float* k = qkv + r * ldx + lay.k_col(g);
          const float* v = qkv + r * ldx + lay.v_col(g);
          auto add_u = [&](float* Sf, float w) {
            if (w == 0.f) return;
            for (int d = 0; d < D; ++d) Sf[d] += w * v[d];
            Sf[D] += w;
          };
          add_u(St, 1.f);
          for (int a = 0; a < D; ++a) add_u(St + int64_t(1 + a) * D1, k[a]);
          {
            float* Sp = St + int64_t(1 + D) * D1;
            int64_t e = 0;
            for (int a = 0; a < D; ++a)
              for (int b = a; b < D; ++b, ++e) add_u(Sp + e * D1, k[a] * k[b]);
          }
          for (int h = g * per; h < (g + 1) * per; ++h) {
            if (plan[size_t(h)].kind != HeadKind::Linear) continue;
            const LinearQ& lq = m.linears[size_t(l)][size_t(h)];
            const float* q = qkv + r * ldx + lay.q_col(h);
            psi[0] = lq.a0;
            for (int a = 0; a < D; ++a) psi[1 + a] = lq.lin[size_t(a)] * q[a];
            {
              int64_t e = 0;
              for (int a = 0; a < D; ++a)
                for (int b = a; b < D; ++b, ++e) psi[1 + D + e] = lq.wp[size_t(e)] * q[a] * q[b];
            }
            (void)P;
            std::fill(acc, acc + D1, 0.f);
            for (int64_t f = 0; f < m.Fw; ++f) {
              const float w = psi[f];
              if (w == 0.f) continue;
              const float* Sf = St + f * D1;
              for (int d = 0; d < D1; ++d) acc[d] += w * Sf[d];
            }
            const float den = acc[D];
            if (!(den > 0.f) || !std::isfinite(den)) {
#pragma omp atomic write
              failed = 1;
              continue;
            }
            const float inv = 1.f / den;
            float* o = att + r * ldo + lay.out_col(h);
            for (int d = 0; d < D; ++d) o[d] = acc[d] * inv;
          }
        }
      }
    });
  }
  errors.rethrow();
  // Merge each split head's parts in part order: out = sum_p e^(m_p - M) o_p / sum_p e^(m_p - M) s_p.
  if (split)
    for (int h = 0; h < m.H; ++h) {
      if (!plan[size_t(h)].softmax_family()) continue;
      const int p0 = m.head_part0[size_t(h)], np = m.head_parts[size_t(h)];
      float M = neg_inf;
      for (int p = p0; p < p0 + np; ++p) M = std::max(M, m.part_max[size_t(p)]);
      float* out = att + lay.out_col(h);
      std::fill(out, out + D, 0.f);
      float den = 0.f;
      for (int p = p0; p < p0 + np; ++p) {
        const float w = exp_or_zero(m.part_max[size_t(p)] - M);  // a part with no visible key: 0
        if (w == 0.f) continue;
        den += w * m.part_sum[size_t(p)];
        const float* o = m.part_out.data() + size_t(p) * size_t(D);
        for (int d = 0; d < D; ++d) out[d] += w * o[d];
      }
      const float inv = 1.f / den;  // den >= 1: the row's own key is always visible
      for (int d = 0; d < D; ++d) out[d] *= inv;
    }
  if (failed)
    fail("decoder: a linear head of layer " + std::to_string(l) +
         " has a non-positive or non-finite denominator (as the training forward would report)");
  // The rows' K/V into the cache, at their original positions.
  for (int g = 0; g < m.KV; ++g) {
    const KvHeadPolicy& pol = cache_.policy(l, g);
    if (!pol.has_k && !pol.has_v) continue;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t slot = cache_.slot_of(l, g, c0 + r);
      const float* row = qkv + r * ldx;
      if (cache_.half()) {
        const cpu::HalfType ht = cache_.half_type();
        const bool ok = (!pol.has_k || cpu::kv_store_row(cache_.k_row16(l, g, slot), row + lay.k_col(g), D, ht)) &&
                        (!pol.has_v || cpu::kv_store_row(cache_.v_row16(l, g, slot), row + lay.v_col(g), D, ht));
        if (!ok)
          fail("decoder: layer " + std::to_string(l) + " KV head " + std::to_string(g) + " at position " +
               std::to_string(c0 + r) + " has a K or V value beyond fp16's range (65504): use --kv-cache bf16 or fp32");
        continue;
      }
      if (pol.has_k) std::copy(row + lay.k_col(g), row + lay.k_col(g) + D, cache_.k_row(l, g, slot));
      if (pol.has_v) std::copy(row + lay.v_col(g), row + lay.v_col(g) + D, cache_.v_row(l, g, slot));
    }
  }
}

}  // namespace hw::infer

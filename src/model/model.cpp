// The model's forward and backward pass for every family, written once against the Backend
// interface (the layer's forward sequence: layer_forward.hpp, shared with cached decoding). Head
// parameters are set up and read in model_head_params.cpp, plan changes in model_plan_install.cpp.
#include "headwise/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/rope_freqs.hpp"
#include "model/layer_forward.hpp"
#include "model/model_impl.hpp"

namespace hw {

using model_detail::find_ptr;
using model_detail::Weights;

namespace {

// The mean loss is over targets that are not ignored (kIgnoreTarget); at least one.
int64_t count_targets(const int32_t* targets, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += targets[i] != cpu::kIgnoreTarget;
  check(c > 0, "every target of the batch is ignored: nothing to compute a loss on");
  return c;
}

}  // namespace

template <class F>
Model<F>::Model(const ModelConfig& cfg, const Backend<F>& ops, const HeadExtras& extras, bool trainable)
    : cfg_(cfg),
      trainable_(trainable),
      ops_(ops),
      params_("params", ops.device()),
      grads_("grads", ops.device()),
      buffers_("buffers", ops.device()),
      acts_("activations", ops.device()),
      weights16_("params.bf16", ops.device()) {
  cfg_.validate();
  build(extras);
}

template <class F>
Model<F>::~Model() = default;

template <class F>
void Model<F>::build(const HeadExtras& extras) {
  if (cfg_.lora.enabled()) {
    check(ops_.has_lora_ops(), std::string("model.lora: backend ") + ops_.name() +
                                   " has no LoRA ops (adapters run on the CPU backend so far)");
    check(precision_ == Precision::Full, "model.lora: adapters need train.precision = fp32 (no bf16 LoRA yet)");
  }
  if (trainable_) {
    check(cfg_.attn_pdrop == 0.0, "model.attn_pdrop " + std::to_string(cfg_.attn_pdrop) +
                                      ": dropout on attention probabilities is not implemented for training (no "
                                      "attention kind has it); set it to 0 (resid_pdrop and embd_pdrop are)");
    if (cfg_.any_dropout())
      check(ops_.has_dropout_op(), std::string("model.resid_pdrop / model.embd_pdrop: backend ") + ops_.name() +
                                       " has no dropout op (dropout trains on the CPU backend so far: set both "
                                       "to 0, or train.device = \"cpu\")");
  }
  if (cfg_.needs_llama_ops())
    check(ops_.has_llama_ops(), std::string("model.family ") + cfg_.family + ": backend " + ops_.name() +
                                    " has no RMSNorm, SwiGLU, q/k norm or scaled-RoPE ops (Llama-family models run "
                                    "on the CPU backend so far: train.device = \"cpu\")");
  rope_freqs_ = rope_inv_freq(cfg_);
  layouts_ = build_layouts(cfg_);
  specs_ = param_specs(cfg_, extras);
  params_.reset();
  grads_.reset();
  buffers_.reset();
  acts_.reset();
  weights16_.reset();
  B_ = T_ = 0;
  log_z_rows_ = 0;  // new buffers: no static head's normalisers yet
  logits_whole_ = false;
  constexpr DType dt = dtype_of<F>();
  for (const auto& s : specs_) {
    if (s.role == ParamRole::Param) {
      params_.declare(s.name, s.shape, dt);
      if (trainable_) grads_.declare(s.name, s.shape, dt);
    } else {
      buffers_.declare(s.name, s.shape, s.is_int ? DType::I32 : dt);
    }
  }
  // Static heads also keep their row normalisers (derived from alpha and rho).
  Impl::declare_static_normalisers(cfg_, buffers_);
  params_.allocate();
  grads_.allocate();
  buffers_.allocate();

  impl_ = std::make_unique<Impl>();
  // The parameter view finds frozen weights among the buffers; the gradient view leaves them null.
  auto bind = [&](Arena& arena, Arena* frozen, Weights<F>& w) {
    auto find = [&](const std::string& name) {
      F* p = find_ptr<F>(arena, name);
      return p || !frozen ? p : find_ptr<F>(*frozen, name);
    };
    w.wte = find("wte.weight");
    w.wpe = find("wpe.weight");
    w.lnf_w = find("ln_f.weight");
    w.lnf_b = find("ln_f.bias");
    w.lm_head = find("lm_head.weight");
    w.layers.assign(size_t(cfg_.n_layer), {});
    for (int l = 0; l < cfg_.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      auto& L = w.layers[size_t(l)];
      L.ln1_w = find(p + "ln_1.weight");
      L.ln1_b = find(p + "ln_1.bias");
      L.attn_w = find(layer_matrix_name(l, 0));
      L.attn_b = find(p + "attn.c_attn.bias");
      L.proj_w = find(layer_matrix_name(l, 1));
      L.proj_b = find(p + "attn.c_proj.bias");
      L.ln2_w = find(p + "ln_2.weight");
      L.ln2_b = find(p + "ln_2.bias");
      L.fc_w = find(layer_matrix_name(l, 2));
      L.fc_b = find(p + "mlp.c_fc.bias");
      L.fcproj_w = find(layer_matrix_name(l, 3));
      L.fcproj_b = find(p + "mlp.c_proj.bias");
      for (int t = 0; t < kLoraTargets; ++t) {
        L.lora_a[size_t(t)] = find(lora_a_name(l, LoraTarget(t)));
        L.lora_b[size_t(t)] = find(lora_b_name(l, LoraTarget(t)));
      }
      L.q_norm = find(p + "attn.q_norm.weight");
      L.k_norm = find(p + "attn.k_norm.weight");
    }
  };
  bind(params_, &buffers_, impl_->w);
  bind(grads_, nullptr, impl_->g);

  // Head parameters: values from extras or defaults, pointers into the arenas.
  impl_->bind_head_params(*this, extras);
  if (trainable_) build_grad_ranges();
  fwd_names_.clear();
  bwd_names_.clear();
  for (int l = 0; l < cfg_.n_layer; ++l) {
    fwd_names_.push_back("layer " + std::to_string(l) + " forward");
    bwd_names_.push_back("layer " + std::to_string(l) + " backward");
  }
}

// Walk the gradient tensors (declared like the Param specs, in their order) and cut the block
// into one range per layer plus the tensors outside the layers.
template <class F>
const model_detail::Weights<F>& Model<F>::weights() const {
  return impl_->w;
}

template <class F>
const attn::LayerHeadParams<F>& Model<F>::head_params(int l) const {
  check(l >= 0 && l < cfg_.n_layer, "head_params: no layer " + std::to_string(l));
  return impl_->head_params[size_t(l)];
}

template <class F>
void Model<F>::build_grad_ranges() {
  std::vector<int> layer_of;
  for (const auto& s : specs_)
    if (s.role == ParamRole::Param) layer_of.push_back(s.layer);
  const auto& ts = grads_.tensors();
  check(layer_of.size() == ts.size(), "internal: gradient tensors do not follow the parameter specs");
  auto start = [&](size_t i) { return i < ts.size() ? grads_.offset_of(*ts[i]) : grads_.bytes(); };
  layer_ranges_.assign(size_t(cfg_.n_layer), {});
  outer_ranges_.clear();
  std::vector<bool> seen(size_t(cfg_.n_layer), false);
  int last_layer = -1;
  for (size_t i = 0; i < ts.size();) {
    size_t j = i;
    while (j < ts.size() && layer_of[j] == layer_of[i]) ++j;
    const ByteRange r{start(i), start(j)};
    const int l = layer_of[i];
    if (l < 0) {
      outer_ranges_.push_back(r);
    } else {
      check(!seen[size_t(l)] && l > last_layer,
            "internal: the gradient tensors of layer " + std::to_string(l) + " are not contiguous and in order");
      seen[size_t(l)] = true;
      last_layer = l;
      layer_ranges_[size_t(l)] = r;
    }
    i = j;
  }
  // A layer without trained tensors (frozen base weights, no adapters there) gets an empty range
  // where its tensors would be: at the start of the next trained layer's, or after the last one.
  for (int l = cfg_.n_layer - 1; l >= 0; --l) {
    if (seen[size_t(l)]) continue;
    size_t at = grads_.bytes();
    if (l + 1 < cfg_.n_layer) {
      at = layer_ranges_[size_t(l + 1)].begin;
    } else {
      for (size_t i = 0; i < ts.size(); ++i)
        if (layer_of[i] >= 0) at = start(i + 1);  // after the last layer tensor
      if (last_layer < 0) at = outer_ranges_.empty() ? 0 : outer_ranges_.front().end;
    }
    layer_ranges_[size_t(l)] = {at, at};
  }
}

template <class F>
std::vector<typename Model<F>::ByteRange> Model<F>::grad_ready_ranges(int layer) const {
  check(layer >= -1 && layer < cfg_.n_layer, "grad_ready_ranges: no layer " + std::to_string(layer));
  if (layer < 0) return outer_ranges_;
  return {layer_ranges_[size_t(layer)]};
}

template <class F>
void Model<F>::set_classifier_chunk_rows(int64_t rows) {
  check(rows >= 0, "classifier chunk rows must be >= 0 (0 = the whole micro-batch), got " + std::to_string(rows));
  chunk_rows_ = rows;
}

template <class F>
void Model<F>::set_recompute_gelu(bool on) {
  if (on != recompute_gelu_) drop_activations();  // the next reserve_activations re-declares
  recompute_gelu_ = on;
}

template <class F>
void Model<F>::init_weights(uint64_t seed) {
  // The model's weights (trained or frozen) draw from one stream in spec order; adapters draw
  // from their own, so adding adapters changes no base weight.
  Rng rng(seed);
  for (const auto& s : specs_) {
    if ((s.role != ParamRole::Param && !s.frozen) || s.adapter) continue;
    // A head kind's own parameters (linear L, the valued kinds' trained values) keep their
    // plan-given values.
    if (s.head_value) continue;
    std::vector<double> stored(size_t(stored_numel(s)));
    for (auto& x : stored) x = s.init_std > 0 ? s.init_std * rng.normal() : s.init_value;
    const attn::LayerLayout* lay = s.layer >= 0 ? &layouts_[size_t(s.layer)] : nullptr;
    Tensor& t = s.frozen ? buffers_.get(s.name) : params_.get(s.name);
    std::vector<F> compact(size_t(t.numel()));
    compact_from_stored(s, lay, stored.data(), compact.data());
    write_device(ops_, t.as<F>(), compact);
  }
  init_adapters(seed);
}

// Frees the activations and forgets every pointer into them, so a read-back before the next
// forward reports "no forward pass" instead of reading freed memory.
template <class F>
void Model<F>::drop_activations() {
  acts_.reset();
  B_ = T_ = 0;
  logits_whole_ = false;
  impl_->full = {};
  impl_->half = {};
}

template <class F>
void Model<F>::set_precision(Precision p) {
  if (p == Precision::Bf16) {
    check(!cfg_.lora.enabled(), "model.lora: adapters need train.precision = fp32 (no bf16 LoRA yet)");
    (void)bf16_ops();  // refuse now, not at the first step
    check(!cfg_.needs_llama_ops() || bf16_ops().has_llama_ops(),
          std::string("precision bf16: backend ") + ops_.name() + " has no bf16 Llama-family ops");
    check(!trainable_ || !cfg_.any_dropout() || bf16_ops().has_dropout_op(),
          std::string("precision bf16: backend ") + ops_.name() + " has no bf16 dropout op (model.resid_pdrop, embd_pdrop)");
  }
  if (p != precision_) drop_activations();          // the next reserve_activations re-declares
  precision_ = p;
}

template <class F>
const ComputeOps<bf16, F>& Model<F>::bf16_ops() const {
  check(std::is_same_v<F, float>, "precision bf16 needs a float model");
  const ComputeOps<bf16, F>* o = ops_.bf16_ops();
  check(o != nullptr, std::string("precision bf16: backend ") + ops_.name() + " has no bf16 ops");
  return *o;
}

// One bf16 element per parameter-block element (padding included), so each tensor's copy sits
// at the same element offset as the tensor: one rounding op covers the whole block.
template <class F>
void Model<F>::refresh_weight_copy() {
  const int64_t n = int64_t(params_.bytes() / sizeof(F));
  auto& I = *impl_;
  if (!weights16_.allocated()) {
    weights16_.declare("params.bf16", {n}, DType::BF16);
    weights16_.allocate();
    const auto* base = static_cast<const F*>(params_.base());
    bf16* base16 = static_cast<bf16*>(weights16_.base());
    auto at = [&](const F* p) { return p ? base16 + (p - base) : nullptr; };
    auto& w = I.w;
    auto& c = I.w16;
    c.wte = at(w.wte);
    c.wpe = at(w.wpe);
    c.lnf_w = at(w.lnf_w);
    c.lnf_b = at(w.lnf_b);
    c.lm_head = at(w.lm_head);
    c.layers.assign(w.layers.size(), {});
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const auto& L = w.layers[l];
      c.layers[l] = {at(L.ln1_w), at(L.ln1_b), at(L.attn_w), at(L.attn_b),   at(L.proj_w),   at(L.proj_b),
                     at(L.ln2_w), at(L.ln2_b), at(L.fc_w),   at(L.fc_b),     at(L.fcproj_w), at(L.fcproj_b)};
    }
  }
  bf16_ops().round_weights(static_cast<bf16*>(weights16_.base()), static_cast<const F*>(params_.base()), n);
}

// The one place the precision picks the step's ops: fn gets the backend itself (Full) or its
// bf16 ops (Bf16), and is generic over the ops' activation type.
template <class F>
template <class Fn>
decltype(auto) Model<F>::with_step_ops(Fn&& fn) {
  if constexpr (std::is_same_v<F, float>)
    if (precision_ == Precision::Bf16) return fn(bf16_ops());
  return fn(static_cast<const ComputeOps<F, F>&>(ops_));
}

template <class F>
void Model<F>::reserve_activations(int64_t B, int64_t T) {
  with_step_ops([&](const auto& o) { reserve_activations_as(o, B, T); });
}

template <class F>
template <class A>
void Model<F>::reserve_activations_as(const ComputeOps<A, F>& o, int64_t B, int64_t T) {
  check(B > 0 && T > 0, "micro-batch and sequence length must be positive");
  check(T <= cfg_.block_size, "sequence length " + std::to_string(T) + " exceeds model.block_size " +
                                  std::to_string(cfg_.block_size));
  ensure_static_normalisers(T);  // (a no-op once rows [0, T) are there)
  const int64_t N = B * T, C = cfg_.n_embd, V = cfg_.vocab_size, I_mlp = cfg_.intermediate(), FW = cfg_.fc_width();
  const int64_t R = chunk_rows_for(N);
  if (B == B_ && T == T_ && R == acts_chunk_ && acts_plan_ == cfg_.head_plan && acts_.allocated())
    return;  // (set_recompute_gelu resets acts_)
  acts_plan_ = cfg_.head_plan;
  acts_.reset();
  logits_whole_ = false;
  constexpr DType at = dtype_of<A>(), ft = dtype_of<F>();
  auto& I = *impl_;
  auto decl = [&](const std::string& name, std::vector<int64_t> shape) { return acts_.declare(name, shape, at); };
  auto stat = [&](const std::string& name, std::vector<int64_t> shape) { return acts_.declare(name, shape, ft); };
  Tensor* tokens = acts_.declare("tokens", {N}, DType::I32);
  Tensor* targets = acts_.declare("targets", {N}, DType::I32);
  Tensor* encoded = decl("encoded", {N, C});
  // With GELU recomputation every layer's GELU output lives in this one buffer: forward writes
  // it right before the projection reads it, backward recomputes it right before use.
  Tensor* shared_gelu = recompute_gelu_ ? decl("recompute.fch_gelu", {N, I_mlp}) : nullptr;
  int64_t max_qkv = 0, max_out = 0, max_ws = 0;
  const attn::AttnDims dims{B, T};
  struct LayerTensors {
    Tensor *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *row_stats, *resid2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu,
        *resid3, *qk_raw, *qk_rstd;
  };
  std::vector<LayerTensors> lt;
  if (forward_only_) {  // every layer writes one set of tensors, as wide as the widest layer's
    int64_t qkv_w = 0, out_w = 0, rows = 0, heads = 0;
    for (int l = 0; l < cfg_.n_layer; ++l) {
      const auto& lay = layouts_[size_t(l)];
      qkv_w = std::max(qkv_w, lay.qkv_width());
      out_w = std::max(out_w, lay.out_width());
      rows = std::max(rows, attn::row_stats_size(lay, dims));
      heads = std::max<int64_t>(heads, lay.n_q + lay.n_k);
    }
    const std::string p = "shared.";
    LayerTensors one{decl(p + "ln1", {N, C}), stat(p + "ln1_mean", {N}), stat(p + "ln1_rstd", {N}),
                     decl(p + "qkv", {N, qkv_w}), decl(p + "atty", {N, out_w}), stat(p + "row_stats", {rows}),
                     decl(p + "resid2", {N, C}), decl(p + "ln2", {N, C}), stat(p + "ln2_mean", {N}),
                     stat(p + "ln2_rstd", {N}), decl(p + "fch", {N, FW}), decl(p + "fch_gelu", {N, I_mlp}),
                     decl(p + "resid3", {N, C}), nullptr, nullptr};
    if (cfg_.qk_norm) {
      one.qk_raw = decl(p + "qk_raw", {N, heads * cfg_.head_dim()});
      one.qk_rstd = stat(p + "qk_rstd", {N * heads});
    }
    lt.assign(size_t(cfg_.n_layer), one);
  }
  for (int l = 0; l < cfg_.n_layer && !forward_only_; ++l) {
    const auto& lay = layouts_[size_t(l)];
    const std::string p = "h." + std::to_string(l) + ".";
    lt.push_back({decl(p + "ln1", {N, C}), stat(p + "ln1_mean", {N}), stat(p + "ln1_rstd", {N}),
                  decl(p + "qkv", {N, lay.qkv_width()}), decl(p + "atty", {N, lay.out_width()}),
                  stat(p + "row_stats", {attn::row_stats_size(lay, dims)}), decl(p + "resid2", {N, C}),
                  decl(p + "ln2", {N, C}), stat(p + "ln2_mean", {N}), stat(p + "ln2_rstd", {N}),
                  decl(p + "fch", {N, FW}), shared_gelu ? shared_gelu : decl(p + "fch_gelu", {N, I_mlp}),
                  decl(p + "resid3", {N, C}), nullptr, nullptr});
    if (cfg_.qk_norm) {
      const int64_t heads = lay.n_q + lay.n_k;
      lt.back().qk_raw = decl(p + "qk_raw", {N, heads * cfg_.head_dim()});
      lt.back().qk_rstd = stat(p + "qk_rstd", {N * heads});
    }
  }
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const auto& lay = layouts_[size_t(l)];
    max_qkv = std::max(max_qkv, lay.qkv_width());
    max_out = std::max(max_out, lay.out_width());
    max_ws = std::max(max_ws, o.attention_workspace_size(cfg_.head_plan.layers[size_t(l)], lay, dims));
  }
  Tensor* lnf = decl("lnf", {N, C});
  Tensor* lnf_mean = stat("lnf_mean", {N});
  Tensor* lnf_rstd = stat("lnf_rstd", {N});
  Tensor* logits = decl("logits", {R, V});  // one classifier chunk of rows
  // Packed rows are at most half of the batch (upload_targets packs only then).
  Tensor* target_rows = decl("target_rows", {std::max<int64_t>(N / 2, 1), C});
  Tensor* losses = stat("losses", {N});
  // Backward's scratch (none in forward-only mode: forward_backward refuses it).
  auto grad = [&](const std::string& name, std::vector<int64_t> shape) {
    return forward_only_ ? nullptr : decl(name, std::move(shape));
  };
  Tensor* dresid = grad("grad.resid", {N, C});
  Tensor* dln = grad("grad.ln", {N, C});
  Tensor* dfch = grad("grad.fch", {N, FW});
  Tensor* dfch_gelu = grad("grad.fch_gelu", {N, I_mlp});
  Tensor* dqkv = grad("grad.qkv", {N, max_qkv});
  Tensor* datty = grad("grad.atty", {N, max_out});
  Tensor* ws = stat("attention.workspace", {max_ws});
  // LoRA: each adapter's u per layer, and scratch as wide as the widest input and output.
  const LoraConfig& lora = cfg_.lora;
  std::vector<std::array<Tensor*, kLoraTargets>> lora_u(size_t(cfg_.n_layer));
  Tensor *lora_x = nullptr, *lora_out = nullptr, *lora_du = nullptr, *lora_dx = nullptr;
  if (lora.enabled()) {
    for (int l = 0; l < cfg_.n_layer; ++l)
      for (int t = 0; t < kLoraTargets; ++t)
        lora_u[size_t(l)][size_t(t)] =
            lora.on_layer(l) && lora.has(LoraTarget(t))
                ? decl("h." + std::to_string(l) + ".lora_u." + lora_target_name(LoraTarget(t)), {N, lora.rank})
                : nullptr;
    const int64_t wide = std::max({C, max_qkv, max_out});
    lora_x = decl("lora.x", {N, wide});
    lora_out = decl("lora.out", {N, wide});
    lora_du = decl("lora.du", {N, int64_t(lora.rank)});
    lora_dx = decl("lora.dx", {N, wide});
  }
  acts_.allocate();
  I.tokens = tokens->i32();
  I.targets = targets->i32();
  StepActs<A>& S = I.template acts<A>();
  S = {};
  S.encoded = encoded->template as<A>();
  for (const auto& t : lt) {
    S.layers.push_back({t.ln1->template as<A>(), t.qkv->template as<A>(), t.atty->template as<A>(), t.resid2->template as<A>(), t.ln2->template as<A>(),
                        t.fch->template as<A>(), t.fch_gelu->template as<A>(), t.resid3->template as<A>(), t.ln1_mean->template as<F>(),
                        t.ln1_rstd->template as<F>(), t.row_stats->template as<F>(), t.ln2_mean->template as<F>(), t.ln2_rstd->template as<F>()});
    if (t.qk_raw) {
      S.layers.back().qk_raw = t.qk_raw->template as<A>();
      S.layers.back().qk_rstd = t.qk_rstd->template as<F>();
    }
  }
  S.lnf = lnf->template as<A>();
  S.lnf_mean = lnf_mean->template as<F>();
  S.lnf_rstd = lnf_rstd->template as<F>();
  S.logits = logits->template as<A>();
  S.target_rows = target_rows->template as<A>();
  I.sparse_target_rows.clear();
  I.sparse_target_rows.reserve(size_t(N));
  I.packed_targets.reserve(size_t(N));
  S.losses = losses->as<F>();
  auto ptr = [](Tensor* t) { return t ? t->template as<A>() : nullptr; };
  S.dresid = ptr(dresid);
  S.dln = ptr(dln);
  S.dfch = ptr(dfch);
  S.dfch_gelu = ptr(dfch_gelu);
  S.dqkv = ptr(dqkv);
  S.datty = ptr(datty);
  S.workspace = ws->as<F>();
  for (int l = 0; l < cfg_.n_layer; ++l)
    for (int t = 0; t < kLoraTargets; ++t) S.layers[size_t(l)].lora_u[size_t(t)] = ptr(lora_u[size_t(l)][size_t(t)]);
  S.lora_x = ptr(lora_x);
  S.lora_out = ptr(lora_out);
  S.lora_du = ptr(lora_du);
  S.lora_dx = ptr(lora_dx);
  B_ = B;
  T_ = T;
  acts_chunk_ = R;
}

template <class F>
void Model<F>::forward_layers(const int32_t* inputs, int64_t B, int64_t T) {
  with_step_ops([&](const auto& o) {
    forward_start_as(o, inputs, B, T);
    for (int l = 0; l < cfg_.n_layer; ++l) forward_layer_as(o, l);
    ops_.range_pop();
  });
}

template <class F>
void Model<F>::set_forward_only(bool on) {
  if (on != forward_only_) drop_activations();  // the next reserve_activations re-declares
  forward_only_ = on;
}

template <class F>
void Model<F>::forward_start(const int32_t* inputs, int64_t B, int64_t T) {
  with_step_ops([&](const auto& o) {
    forward_start_as(o, inputs, B, T);
    ops_.range_pop();
  });
}

template <class F>
void Model<F>::forward_layer(int l) {
  check(l >= 0 && l < cfg_.n_layer, "forward_layer: no layer " + std::to_string(l));
  check(B_ > 0, "forward_layer: no forward_start before it");
  with_step_ops([&](const auto& o) { forward_layer_as(o, l); });
}

template <class F>
void Model<F>::forward_layer_qkv(int l) {
  check(l >= 0 && l < cfg_.n_layer, "forward_layer_qkv: no layer " + std::to_string(l));
  check(B_ > 0, "forward_layer_qkv: no forward_start before it");
  with_step_ops([&](const auto& o) { forward_layer_as(o, l, /*qkv_only=*/true); });
}

// Layer l's input: the residual stream (the embeddings, or layer l-1's resid3) and its
// normalised form (layer l's ln1), each B*T x n_embd in the step's activation type.
template <class F>
size_t Model<F>::layer_input_bytes() const {
  const size_t elem = precision_ == Precision::Bf16 ? sizeof(bf16) : sizeof(F);
  return 2 * size_t(B_ * T_ * cfg_.n_embd) * elem;
}

template <class F>
void Model<F>::save_layer_input(int l, std::vector<unsigned char>& host) const {
  check(l >= 0 && l < cfg_.n_layer && B_ > 0, "save_layer_input: no layer " + std::to_string(l) + " input yet");
  host.resize(layer_input_bytes());
  const size_t half = host.size() / 2;
  auto save = [&](const auto& S) {
    ops_.copy_to_host(host.data(), l == 0 ? S.encoded : S.layers[size_t(l - 1)].resid3, half);
    ops_.copy_to_host(host.data() + half, S.layers[size_t(l)].ln1, half);
  };
  if (precision_ == Precision::Bf16) save(impl_->half);
  else save(impl_->full);
}

template <class F>
void Model<F>::load_layer_input(int l, const std::vector<unsigned char>& host) {
  check(l >= 0 && l < cfg_.n_layer && B_ > 0, "load_layer_input: no layer " + std::to_string(l) + " (or no forward_start)");
  check(host.size() == layer_input_bytes(), "load_layer_input: " + std::to_string(host.size()) +
                                                " bytes for a layer input of " + std::to_string(layer_input_bytes()));
  const size_t half = host.size() / 2;
  auto load = [&](auto& S) {
    ops_.copy_to_device(l == 0 ? S.encoded : S.layers[size_t(l - 1)].resid3, host.data(), half);
    ops_.copy_to_device(S.layers[size_t(l)].ln1, host.data() + half, half);
  };
  if (precision_ == Precision::Bf16) load(impl_->half);
  else load(impl_->full);
}

// Embeddings and layer 0's ln1 (or ln_f's output without layers); leaves the "forward" range open.
template <class F>
template <class A>
void Model<F>::forward_start_as(const ComputeOps<A, F>& o, const int32_t* inputs, int64_t B, int64_t T) {
  // The bf16 copy is re-rounded on every forward, not tracked against the writers of the
  // parameters (optimizer, checkpoints, plan changes, planners): one elementwise pass over the
  // weights, small next to the step, and never stale.
  if constexpr (!std::is_same_v<A, F>) refresh_weight_copy();
  reserve_activations_as<A>(o, B, T);
  auto& I = *impl_;
  auto& S = I.template acts<A>();
  const Weights<A>& cw = I.template compute_weights<A>();  // GEMM and embedding weights
  const Weights<F>& fw = I.w;                             // LayerNorm weights (always F)
  const int64_t N = B * T, C = cfg_.n_embd;
  for (int64_t i = 0; i < N; ++i)
    if (inputs[i] < 0 || inputs[i] >= cfg_.vocab_size)
      fail("input token " + std::to_string(inputs[i]) + " at position " + std::to_string(i) +
           " is outside the vocabulary of " + std::to_string(cfg_.vocab_size));
  write_device(ops_, I.tokens, inputs, N);
  logits_whole_ = false;
  ops_.range_push("forward");
  o.encoder_forward(S.encoded, I.tokens, cw.wte, cw.wpe, B, T, C);
  const double p_embd = dropping(cfg_.embd_pdrop);
  if (p_embd > 0) o.dropout(S.encoded, S.encoded, N * C, p_embd, dropout_site_seed(-1, 0));
  // Layer 0's ln_1 reads the embeddings; every later LayerNorm (the next layer's ln_1, or ln_f)
  // reads a residual sum and is fused with it.
  if (cfg_.n_layer > 0)
    model_detail::norm_rows(o, model_detail::LayerFamily::of(cfg_), S.layers[0].ln1, S.layers[0].ln1_mean,
                            S.layers[0].ln1_rstd, S.encoded, fw.layers[0].ln1_w, fw.layers[0].ln1_b, N);
  else
    model_detail::norm_rows(o, model_detail::LayerFamily::of(cfg_), S.lnf, S.lnf_mean, S.lnf_rstd, S.encoded,
                            fw.lnf_w, fw.lnf_b, N);
}

// Layer l of the forward: reads its input residual (the embeddings, or layer l-1's resid3) and
// its normalised input (ln1, which the step before it wrote), writes the next layer's ln1 (or
// ln_f's output after the last layer).
template <class F>
template <class A>
void Model<F>::forward_layer_as(const ComputeOps<A, F>& o, int l, bool qkv_only) {
  auto& I = *impl_;
  auto& S = I.template acts<A>();
  const auto& W = I.template compute_weights<A>().layers[size_t(l)];  // GEMM weights
  const Weights<F>& fw = I.w;                                        // norm weights (always F)
  const auto& Wf = fw.layers[size_t(l)];
  const auto& Ac = S.layers[size_t(l)];
  const auto& lay = layouts_[size_t(l)];
  const int64_t N = B_ * T_, C = cfg_.n_embd;
  const double p_resid = dropping(cfg_.resid_pdrop);
  const bool last = l + 1 == cfg_.n_layer;
  ops_.range_push(fwd_names_[size_t(l)].c_str());
  model_detail::LayerRows<A, F> r;
  r.n = N;
  r.layout = &lay;
  r.in = l == 0 ? S.encoded : S.layers[size_t(l - 1)].resid3;
  r.ln1 = Ac.ln1;
  r.qkv = Ac.qkv;
  r.att = Ac.atty;
  r.resid2 = Ac.resid2;
  r.ln2 = Ac.ln2;
  r.fch = Ac.fch;
  r.fch_act = Ac.fch_gelu;
  r.resid3 = Ac.resid3;
  r.ln_next = last ? S.lnf : S.layers[size_t(l + 1)].ln1;
  r.ln2_w = Wf.ln2_w;
  r.ln2_b = Wf.ln2_b;
  r.next_w = last ? fw.lnf_w : fw.layers[size_t(l + 1)].ln1_w;
  r.next_b = last ? fw.lnf_b : fw.layers[size_t(l + 1)].ln1_b;
  r.q_norm = Wf.q_norm;
  r.k_norm = Wf.k_norm;
  r.qk_raw = Ac.qk_raw;
  r.qk_rstd = Ac.qk_rstd;
  r.ln2_mean = Ac.ln2_mean;
  r.ln2_rstd = Ac.ln2_rstd;
  r.next_mean = last ? S.lnf_mean : S.layers[size_t(l + 1)].ln1_mean;
  r.next_rstd = last ? S.lnf_rstd : S.layers[size_t(l + 1)].ln1_rstd;
  // The training side of the sequence: the model's weights (or their bf16 copy), LoRA after the
  // products it adapts, dropout, RoPE over B sequences from position 0, the layer's heads and
  // the observer.
  struct Step {
    Model& m;
    const ComputeOps<A, F>& o;
    const model_detail::LayerWeights<A>& W;
    const model_detail::LayerActs<A, F>& Ac;
    const attn::LayerLayout& lay;
    int l;
    int64_t N, C;
    double p_resid;
    void linear(model_detail::LayerMatrix which, A* out, const A* in) {
      const ModelConfig& cfg = m.cfg_;
      const bool adapted = cfg.lora.on_layer(l);
      switch (which) {
        case model_detail::LayerMatrix::QKV:
          o.matmul_forward(out, in, W.attn_w, W.attn_b, N, C, lay.qkv_width());
          if constexpr (std::is_same_v<A, F>)
            if (adapted && cfg.lora.targets_any_qkv()) m.lora_qkv_forward(l);
          break;
        case model_detail::LayerMatrix::Out:
          o.matmul_forward(out, in, W.proj_w, W.proj_b, N, lay.out_width(), C);
          if constexpr (std::is_same_v<A, F>)
            if (adapted && cfg.lora.has(LoraTarget::O)) m.lora_out_forward(l);
          break;
        case model_detail::LayerMatrix::Fc: o.matmul_forward(out, in, W.fc_w, W.fc_b, N, C, cfg.fc_width()); break;
        case model_detail::LayerMatrix::FcProj:
          o.matmul_forward(out, in, W.fcproj_w, W.fcproj_b, N, cfg.intermediate(), C);
          break;
      }
    }
    bool linear_gelu(A* pre, A* post, const A* in) {
      o.matmul_gelu_forward(pre, post, in, W.fc_w, W.fc_b, N, C, m.cfg_.intermediate());
      return true;
    }
    void rope(A* qkv) { m.rope(o, qkv, l, /*backward=*/false); }
    void attention(const A* qkv, A* att) {
      o.attention_forward(m.cfg_.head_plan.layers[size_t(l)], lay, attn::AttnDims{m.B_, m.T_},
                          m.impl_->head_params[size_t(l)], qkv, att, Ac.row_stats,
                          m.impl_->template acts<A>().workspace);
      if (m.observer_) m.template observe_layer<A>(l, nullptr);
    }
    void dropout(int site, A* x) {
      if (p_resid > 0) o.dropout(x, x, N * C, p_resid, m.dropout_site_seed(l, site));
    }
  } step{*this, o, W, Ac, lay, l, N, C, p_resid};
  if (qkv_only)
    model_detail::layer_qkv_rows(o, model_detail::LayerFamily::of(cfg_), r, step);
  else
    model_detail::layer_forward_rows(o, model_detail::LayerFamily::of(cfg_), r, step);
  ops_.range_pop();
}

template <class F>
int64_t Model<F>::upload_targets(const int32_t* targets, int64_t N) {
  const int64_t counted = count_targets(targets, N);
  auto& rows = impl_->sparse_target_rows;
  rows.clear();
  if (2 * counted > N) {
    write_device(ops_, impl_->targets, targets, N);
    return counted;
  }
  // Sparse targets: the rows that have one, and their targets packed at the front.
  auto& packed = impl_->packed_targets;
  packed.clear();
  for (int64_t i = 0; i < N; ++i)
    if (targets[i] != cpu::kIgnoreTarget) {
      rows.push_back(i);
      packed.push_back(targets[i]);
    }
  write_device(ops_, impl_->targets, packed.data(), counted);
  return counted;
}

template <class F>
double Model<F>::classifier(bool backward, double dloss) {
  return with_step_ops([&](const auto& o) { return classifier_as(o, backward, dloss); });
}

// Logits of rows [r0, r0 + n) of the final LayerNorm output into the logits buffer (the LM head,
// tied with wte).
template <class F>
template <class A>
void Model<F>::logits_rows_as(const ComputeOps<A, F>& o, int64_t r0, int64_t n) {
  auto& S = impl_->template acts<A>();
  const int64_t C = cfg_.n_embd;
  const auto& cw = impl_->template compute_weights<A>();
  o.matmul_forward(S.logits, S.lnf + r0 * C, cfg_.tie_word_embeddings ? cw.wte : cw.lm_head, nullptr, n, C,
                   cfg_.vocab_size, /*w_out_in=*/true);
}

// The classifier runs over the final LayerNorm rows in chunks of R. When upload_targets packed
// the targets (most rows have none: MQAR scores 4 of 64 positions), it runs over the rows that
// have one only, gathered into target_rows, so the LM head's cost follows the targets; each
// chunk's gathered rows then give way to their gradient, scattered into grad.ln at the end (zero
// elsewhere, as ignored rows' dlogits are). Row copies are accumulate onto zeroed rows, an op
// every backend has.
template <class F>
template <class A>
double Model<F>::classifier_as(const ComputeOps<A, F>& o, bool backward, double dloss) {
  auto& I = *impl_;
  auto& S = I.template acts<A>();
  // The LM head: wte (tied) or lm_head, and where its gradient goes.
  const A* wte = cfg_.tie_word_embeddings ? I.template compute_weights<A>().wte : I.template compute_weights<A>().lm_head;
  F* dhead = cfg_.tie_word_embeddings ? I.g.wte : I.g.lm_head;
  const std::vector<int64_t>& packed = I.sparse_target_rows;
  const int64_t N = B_ * T_, C = cfg_.n_embd, V = cfg_.vocab_size, R = chunk_rows_for(N);
  const int64_t n_rows = packed.empty() ? N : int64_t(packed.size());
  ops_.range_push("classifier");
  if (backward) o.fill_zero(S.dln, N * C);
  A* rows = S.lnf;
  if (!packed.empty()) {
    rows = S.target_rows;
    o.fill_zero(rows, n_rows * C);
    for (int64_t j = 0; j < n_rows; ++j) o.accumulate(rows + j * C, S.lnf + packed[size_t(j)] * C, C);
  }
  double sum = 0.0;
  for (int64_t r0 = 0; r0 < n_rows; r0 += R) {
    const int64_t n = std::min(R, n_rows - r0);
    A* x = rows + r0 * C;
    o.matmul_forward(S.logits, x, wte, nullptr, n, C, V, /*w_out_in=*/true);
    // With backward, dlogits overwrite the logits in place: they are not needed afterwards.
    sum += o.crossentropy_forward_backward(S.losses + r0, backward ? S.logits : nullptr, S.logits, I.targets + r0, n,
                                           V, backward ? dloss : 0.0);
    if (!backward) continue;
    // LM head (tied with wte): gradients of wte and of this chunk's rows.
    if (packed.empty()) {
      o.matmul_backward(S.dln + r0 * C, dhead, nullptr, S.logits, x, wte, n, C, V, /*w_out_in=*/true);
    } else {
      o.matmul_backward(nullptr, dhead, nullptr, S.logits, x, wte, n, C, V, /*w_out_in=*/true);
      o.fill_zero(x, n * C);
      o.matmul_backward(x, nullptr, nullptr, S.logits, x, wte, n, C, V, /*w_out_in=*/true);
    }
  }
  if (backward && !packed.empty())
    for (int64_t j = 0; j < n_rows; ++j) o.accumulate(S.dln + packed[size_t(j)] * C, rows + j * C, C);
  logits_whole_ = !backward && packed.empty() && R == N;
  ops_.range_pop();
  return sum;
}

template <class F>
double Model<F>::forward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T) {
  forward_layers(inputs, B, T);
  const int64_t N = B * T;
  if (!targets) {
    if (chunk_rows_for(N) == N) {  // whole logits now; chunked ones are computed when read
      with_step_ops([&](const auto& o) { logits_rows_as(o, 0, N); });
      logits_whole_ = true;
    }
    return 0.0;
  }
  const int64_t counted = upload_targets(targets, N);
  return classifier(/*backward=*/false, 0.0) / double(counted);
}

template <class F>
double Model<F>::forward_backward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
                                  double loss_scale) {
  check(targets != nullptr, "forward_backward needs targets");
  check(trainable_, "forward_backward: this model was built for inference only (no gradients)");
  check(!forward_only_, "forward_backward: the model's activations are forward-only (set_forward_only)");
  struct DropoutOn {  // dropout (LoRA's, the model's) in this forward and its backward only (also on a throw)
    bool& flag;
    explicit DropoutOn(bool& f) : flag(f) { flag = true; }
    ~DropoutOn() { flag = false; }
  } dropping(dropout_on_);
  forward_layers(inputs, B, T);
  const double n_targets = double(upload_targets(targets, B * T));
  const double sum = classifier(/*backward=*/true, loss_scale / n_targets);
  backward();
  return sum / n_targets;
}

template <class F>
template <class A>
void Model<F>::read_rows(const A* src, int64_t n, std::vector<F>& host) const {
  if constexpr (std::is_same_v<A, F>) {
    read_device(ops_, src, n, host);
  } else {
    const std::vector<A> raw = read_device(ops_, src, n);
    host.resize(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) host[i] = to_float(raw[i]);
  }
}

// Reads layer l's QKV and attention output (and, in backward, the output's gradient) back,
// widened to double, and hands them to the observer.
template <class F>
template <class A>
void Model<F>::observe_layer(int l, const A* dout) {
  const auto& lay = layouts_[size_t(l)];
  const int64_t N = B_ * T_;
  const auto& Ac = impl_->template acts<A>().layers[size_t(l)];
  std::vector<F> raw;
  auto widen = [&](const A* src, int64_t n) {
    read_rows<A>(src, n, raw);
    return std::vector<double>(raw.begin(), raw.end());
  };
  const std::vector<double> qkv = widen(Ac.qkv, N * lay.qkv_width()), out = widen(Ac.atty, N * lay.out_width());
  std::vector<double> grad;
  if (dout) grad = widen(dout, N * lay.out_width());
  const AttentionView v{l, B_, T_, &cfg_.head_plan.layers[size_t(l)], &lay, &qkv, &out, dout ? &grad : nullptr};
  if (dout)
    observer_->on_backward(v);
  else
    observer_->on_forward(v);
}

template <class F>
void Model<F>::backward() {
  with_step_ops([&](const auto& o) { backward_as(o); });
}

// Backward from the final LayerNorm's output gradient (dln, left by the classifier) down.
// Activation gradients are A; every parameter gradient is F and accumulates in F.
template <class F>
template <class A>
void Model<F>::backward_as(const ComputeOps<A, F>& o) {
  auto& I = *impl_;
  auto& S = I.template acts<A>();
  const Weights<A>& cw = I.template compute_weights<A>();
  const Weights<F>& fw = I.w;
  const int64_t B = B_, T = T_, N = B * T, C = cfg_.n_embd, hd = cfg_.head_dim(), I_mlp = cfg_.intermediate(),
                FW = cfg_.fc_width();
  const attn::AttnDims dims{B, T};
  const A* last = cfg_.n_layer > 0 ? S.layers.back().resid3 : S.encoded;
  const double p_embd = dropping(cfg_.embd_pdrop), p_resid = dropping(cfg_.resid_pdrop);
  // The gradient of a dropped-out projection output: dresid through the same mask (the dropout op
  // is its own backward), in dln, which is free from the norm backward that read it until the
  // GEMM backward that refills it.
  auto through_resid_dropout = [&](int l, int site) -> const A* {
    if (p_resid == 0.0) return S.dresid;
    o.dropout(S.dln, S.dresid, N * C, p_resid, dropout_site_seed(l, site));
    return S.dln;
  };
  ops_.range_push("backward");
  o.fill_zero(S.dresid, N * C);
  norm_backward(o, S.dresid, I.g.lnf_w, I.g.lnf_b, S.dln, last, fw.lnf_w, S.lnf_mean, S.lnf_rstd, N);
  for (int l = cfg_.n_layer - 1; l >= 0; --l) {
    ops_.range_push(bwd_names_[size_t(l)].c_str());
    const auto& W = cw.layers[size_t(l)];
    const auto& Wf = fw.layers[size_t(l)];
    const auto& G = I.g.layers[size_t(l)];
    const auto& Ac = S.layers[size_t(l)];
    const auto& lay = layouts_[size_t(l)];
    const A* in = l == 0 ? S.encoded : S.layers[size_t(l - 1)].resid3;
    // MLP: dresid holds d(resid3); the residual passes it through unchanged.
    if (recompute_gelu_) {  // the shared buffer holds another layer's activation
      if (cfg_.swiglu())
        o.swiglu_forward(Ac.fch_gelu, Ac.fch, N, I_mlp);
      else
        o.gelu_forward(Ac.fch_gelu, Ac.fch, N * I_mlp);
    }
    o.fill_zero(S.dfch_gelu, N * I_mlp);
    const A* dmlp = through_resid_dropout(l, 2);
    o.matmul_backward(S.dfch_gelu, G.fcproj_w, G.fcproj_b, dmlp, Ac.fch_gelu, W.fcproj_w, N, I_mlp, C);
    // dfch (overwritten) and c_fc's bias gradient; the GEMM below adds no bias term.
    if (cfg_.swiglu()) {
      o.swiglu_backward(S.dfch, Ac.fch, S.dfch_gelu, N, I_mlp);
      if (G.fc_b) o.matmul_backward(nullptr, nullptr, G.fc_b, S.dfch, nullptr, nullptr, N, 0, FW);
    } else {
      o.gelu_backward_bias(S.dfch, G.fc_b, Ac.fch, S.dfch_gelu, N, I_mlp);
    }
    o.fill_zero(S.dln, N * C);
    o.matmul_backward(S.dln, G.fc_w, nullptr, S.dfch, Ac.ln2, W.fc_w, N, C, FW);
    norm_backward(o, S.dresid, G.ln2_w, G.ln2_b, S.dln, Ac.resid2, Wf.ln2_w, Ac.ln2_mean, Ac.ln2_rstd, N);
    // Attention: dresid now holds d(resid2).
    o.fill_zero(S.datty, N * lay.out_width());
    const A* dproj = through_resid_dropout(l, 1);
    o.matmul_backward(S.datty, G.proj_w, G.proj_b, dproj, Ac.atty, W.proj_w, N, lay.out_width(), C);
    const bool adapted = cfg_.lora.on_layer(l);
    if constexpr (std::is_same_v<A, F>)
      if (adapted && cfg_.lora.has(LoraTarget::O)) lora_out_backward(l, dproj);
    if (observer_ && observer_->wants_backward()) observe_layer<A>(l, S.datty);
    o.attention_backward(cfg_.head_plan.layers[size_t(l)], lay, dims, I.head_params[size_t(l)], Ac.qkv, Ac.atty,
                         Ac.row_stats, S.datty, S.dqkv, S.workspace);
    rope(o, S.dqkv, l, /*backward=*/true);
    if (cfg_.qk_norm) {  // in place: the normalised heads' gradient becomes the raw heads'
      const int64_t ld = lay.qkv_width(), nq = int64_t(lay.n_q) * hd, nqk = int64_t(lay.n_q + lay.n_k) * hd;
      o.rmsnorm_backward(S.dqkv, ld, G.q_norm, S.dqkv, ld, Ac.qk_raw, nqk, Wf.q_norm, Ac.qk_rstd, N, lay.n_q, hd,
                         /*accumulate=*/false);
      o.rmsnorm_backward(S.dqkv + nq, ld, G.k_norm, S.dqkv + nq, ld, Ac.qk_raw + nq, nqk, Wf.k_norm,
                         Ac.qk_rstd + N * lay.n_q, N, lay.n_k, hd, /*accumulate=*/false);
    }
    o.fill_zero(S.dln, N * C);
    o.matmul_backward(S.dln, G.attn_w, G.attn_b, S.dqkv, Ac.ln1, W.attn_w, N, C, lay.qkv_width());
    if constexpr (std::is_same_v<A, F>)
      if (adapted && cfg_.lora.targets_any_qkv()) lora_qkv_backward(l);
    norm_backward(o, S.dresid, G.ln1_w, G.ln1_b, S.dln, in, Wf.ln1_w, Ac.ln1_mean, Ac.ln1_rstd, N);
    ops_.range_pop();
    if (grad_ready_hook_) grad_ready_hook_(l);  // every gradient of layer l is final
  }
  if (p_embd > 0) o.dropout(S.dresid, S.dresid, N * C, p_embd, dropout_site_seed(-1, 0));
  o.encoder_backward(I.g.wte, I.g.wpe, S.dresid, I.tokens, B, T, C);
  ops_.range_pop();
  if (grad_ready_hook_) grad_ready_hook_(-1);  // wte, wpe, ln_f
}

// dinp += the norm's input gradient; dw (and LayerNorm's db) += the weight gradients.
template <class F>
template <class A>
void Model<F>::norm_backward(const ComputeOps<A, F>& o, A* dinp, F* dw, F* db, const A* dout, const A* inp,
                             const F* w, const F* mean, const F* rstd, int64_t N) const {
  const int64_t C = cfg_.n_embd;
  if (cfg_.rmsnorm())
    o.rmsnorm_backward(dinp, C, dw, dout, C, inp, C, w, rstd, N, 1, C, /*accumulate=*/true);
  else
    o.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

// RoPE on layer l's Q and K blocks of x (a qkv buffer, or its gradient: the inverse rotation),
// from theta alone (an op every backend has) unless the frequencies are scaled.
template <class F>
template <class A>
void Model<F>::rope(const ComputeOps<A, F>& o, A* x, int l, bool backward) const {
  if (!cfg_.rope()) return;
  const auto& lay = layouts_[size_t(l)];
  const int64_t W = lay.qkv_width(), hd = cfg_.head_dim(), k0 = int64_t(lay.n_q) * hd;
  const bool scaled = !cfg_.rope_scaling.type.empty();
  for (const auto& [col0, heads] : {std::pair<int64_t, int64_t>{0, lay.n_q}, {k0, lay.n_k}}) {
    if (scaled && backward)
      o.rope_backward_freqs(x, B_, T_, W, col0, heads, hd, rope_freqs_.data());
    else if (scaled)
      o.rope_forward_freqs(x, B_, T_, W, col0, heads, hd, rope_freqs_.data());
    else if (backward)
      o.rope_backward(x, B_, T_, W, col0, heads, hd, cfg_.rope_theta);
    else
      o.rope_forward(x, B_, T_, W, col0, heads, hd, cfg_.rope_theta);
  }
}

template <class F>
void Model<F>::zero_grads() {
  ops_.fill_zero(static_cast<F*>(grads_.base()), int64_t(grads_.bytes() / sizeof(F)));
}

template <class F>
void Model<F>::read_logits(std::vector<F>& host) {
  with_step_ops([&](const auto& o) { read_logits_as(o, host); });
}

template <class F>
template <class A>
void Model<F>::read_logits_as(const ComputeOps<A, F>& o, std::vector<F>& host) {
  auto& I = *impl_;
  auto& S = I.template acts<A>();
  check(B_ > 0 && S.lnf != nullptr, "read_logits: no forward pass to read logits from");
  const int64_t N = B_ * T_, V = cfg_.vocab_size, R = chunk_rows_for(N);
  host.resize(size_t(N * V));
  std::vector<F> rows;
  if (logits_whole_) {
    read_rows<A>(S.logits, N * V, host);
    return;
  }
  for (int64_t r0 = 0; r0 < N; r0 += R) {  // the final LayerNorm output is still there: recompute
    const int64_t n = std::min(R, N - r0);
    logits_rows_as(o, r0, n);
    read_rows<A>(S.logits, n * V, rows);
    std::copy(rows.begin(), rows.end(), host.begin() + r0 * V);
  }
  logits_whole_ = R == N;
}

template <class F>
void Model<F>::read_layer_qkv(int l, std::vector<F>& host) const {
  check(B_ > 0, "read_layer_qkv: no forward pass to read activations from");
  const int64_t n = B_ * T_ * layouts_.at(size_t(l)).qkv_width();
  if (precision_ == Precision::Bf16) return read_rows<bf16>(impl_->half.layers.at(size_t(l)).qkv, n, host);
  read_rows<F>(impl_->full.layers.at(size_t(l)).qkv, n, host);
}

template <class F>
void Model<F>::read_layer_attn_out(int l, std::vector<F>& host) const {
  check(B_ > 0, "read_layer_attn_out: no forward pass to read activations from");
  const int64_t n = B_ * T_ * layouts_.at(size_t(l)).out_width();
  if (precision_ == Precision::Bf16) return read_rows<bf16>(impl_->half.layers.at(size_t(l)).atty, n, host);
  read_rows<F>(impl_->full.layers.at(size_t(l)).atty, n, host);
}

template <class F>
const F* Model<F>::logits() const {
  check(precision_ == Precision::Full, "logits(): the device logits are bf16 under precision bf16; use read_logits");
  return impl_->full.logits;
}
template <class F>
const F* Model<F>::layer_qkv(int l) const {
  check(precision_ == Precision::Full, "layer_qkv(): bf16 under precision bf16; use read_layer_qkv");
  return impl_->full.layers.at(size_t(l)).qkv;
}
template <class F>
const F* Model<F>::layer_attn_out(int l) const {
  check(precision_ == Precision::Full, "layer_attn_out(): bf16 under precision bf16; use read_layer_attn_out");
  return impl_->full.layers.at(size_t(l)).atty;
}

Precision parse_precision(const std::string& name, const std::string& what) {
  if (name == "fp32") return Precision::Full;
  if (name == "bf16") return Precision::Bf16;
  fail(what + ": unknown precision \"" + name + "\" (use \"fp32\" or \"bf16\")");
}

const char* precision_name(Precision p) { return p == Precision::Bf16 ? "bf16" : "fp32"; }

template class Model<float>;
template class Model<double>;

}  // namespace hw

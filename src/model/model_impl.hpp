#pragma once
// Model<F>'s private state (Impl, StepActs and the weight views they hold), shared by the files
// that define Model's members: model.cpp (the step), model_head_params.cpp, model_plan_install.cpp.
#include <array>
#include <string>
#include <type_traits>
#include <vector>

#include "headwise/model/model.hpp"

namespace hw {

namespace model_detail {

// Per-layer weights (the same struct views the parameter and the gradient arena).
template <class F>
struct LayerWeights {
  F *ln1_w = nullptr, *ln1_b = nullptr, *attn_w = nullptr, *attn_b = nullptr, *proj_w = nullptr, *proj_b = nullptr;
  F *ln2_w = nullptr, *ln2_b = nullptr, *fc_w = nullptr, *fc_b = nullptr, *fcproj_w = nullptr, *fcproj_b = nullptr;
  // LoRA adapters by target (q, k, v, o); null where the layer has none. In the gradient view
  // every frozen weight above is null too.
  std::array<F*, kLoraTargets> lora_a{}, lora_b{};
  F *q_norm = nullptr, *k_norm = nullptr;  // Qwen3's per-head q/k RMSNorm weights [head_dim]
};

template <class F>
struct Weights {
  F *wte = nullptr, *wpe = nullptr, *lnf_w = nullptr, *lnf_b = nullptr;
  F* lm_head = nullptr;  // an untied LM head [vocab, n_embd]; null when tied to wte
  std::vector<LayerWeights<F>> layers;
};

// Saved activations of one layer (what backward reads): A-typed tensors and F statistics.
template <class A, class F>
struct LayerActs {
  A *ln1 = nullptr, *qkv = nullptr, *atty = nullptr, *resid2 = nullptr, *ln2 = nullptr, *fch = nullptr,
    *fch_gelu = nullptr, *resid3 = nullptr;
  F *ln1_mean = nullptr, *ln1_rstd = nullptr, *row_stats = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr;
  // LoRA: u = scaling * dropout(x) A^T per target, [N, rank] (what B's gradient reads).
  std::array<A*, kLoraTargets> lora_u{};
  // q/k norm (Qwen3): the q|k columns before the norm [N, (n_q + n_k) head_dim] and each head
  // row's rstd [N n_q] then [N n_k].
  A* qk_raw = nullptr;
  F* qk_rstd = nullptr;
};

template <class F>
F* find_ptr(Arena& a, const std::string& name) {
  Tensor* t = a.find(name);
  return t ? t->as<F>() : nullptr;
}

}  // namespace model_detail

// One step's activations in storage type A (row statistics, losses and the attention workspace
// are F whatever A is).
template <class F>
template <class A>
struct Model<F>::StepActs {
  A *encoded = nullptr, *lnf = nullptr, *logits = nullptr;
  // The final LayerNorm rows that have targets, gathered when most rows have none (then their
  // gradient, before it is scattered back into grad.ln).
  A* target_rows = nullptr;
  F *lnf_mean = nullptr, *lnf_rstd = nullptr, *losses = nullptr;
  std::vector<model_detail::LayerActs<A, F>> layers;
  // backward scratch, shared by all layers
  A *dresid = nullptr, *dln = nullptr, *dfch = nullptr, *dfch_gelu = nullptr, *dqkv = nullptr, *datty = nullptr;
  F* workspace = nullptr;
  // LoRA scratch, shared by all layers: the dropped-out input (recomputed in backward), an
  // adapter's output or output gradient, u's gradient and the input's gradient.
  A *lora_x = nullptr, *lora_out = nullptr, *lora_du = nullptr, *lora_dx = nullptr;
};

template <class F>
struct Model<F>::Impl {
  model_detail::Weights<F> w, g;  // parameters (the master weights) and their gradients
  model_detail::Weights<bf16> w16;  // Precision::Bf16: the GEMMs' and the embedding's rounded copy of w
  std::vector<attn::LayerHeadParams<F>> head_params;
  int32_t *tokens = nullptr, *targets = nullptr;
  // Rows of the micro-batch whose target is not ignored, in order, when at most half of them
  // are (MQAR's query positions, a prompt's answer): the classifier then runs on those rows
  // alone and `targets` holds their targets, packed. Empty: every row goes through it.
  // Reserved for the batch's rows when the activations are laid out (no allocation per step).
  std::vector<int64_t> sparse_target_rows;
  std::vector<int32_t> packed_targets;  // their targets, staged on the host
  StepActs<F> full;   // Precision::Full
  StepActs<bf16> half;  // Precision::Bf16

  template <class A>
  StepActs<A>& acts() {
    if constexpr (std::is_same_v<A, F>) return full;
    else return half;
  }
  // What the GEMMs and the embedding read: the parameters themselves, or their bf16 copy.
  template <class A>
  const model_detail::Weights<A>& compute_weights() const {
    if constexpr (std::is_same_v<A, F>) return w;
    else return w16;
  }

  // build()'s share of the head parameters (model_head_params.cpp). Before the arenas are
  // allocated: declare the static heads' row normalisers (derived from alpha and rho).
  static void declare_static_normalisers(const ModelConfig& cfg, Arena& buffers);
  // After: fill head_params with values from extras or defaults, pointers into m's arenas.
  void bind_head_params(Model& m, const HeadExtras& extras);
};

}  // namespace hw

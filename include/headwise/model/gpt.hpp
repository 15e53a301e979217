#pragma once
// GPT-2 decoder: pre-LayerNorm blocks, tanh-GELU MLP (4x), tied embedding and LM head,
// learned positions or RoPE, MHA or GQA, and a head plan per layer. One training step reads
// top to bottom in forward() and backward() (gpt.cpp). F is float for training and double for
// the gradient tests.
#include <cstdint>
#include <memory>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/head_extras.hpp"
#include "headwise/model/model_config.hpp"
#include "headwise/model/param_layout.hpp"

namespace hw {

template <class F>
class Model {
 public:
  Model(const ModelConfig& cfg, const Backend<F>& ops, const HeadExtras& extras = {});
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  const std::vector<attn::LayerLayout>& layouts() const { return layouts_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const Backend<F>& ops() const { return ops_; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  Arena& buffers() { return buffers_; }
  const Arena& params() const { return params_; }
  const Arena& buffers() const { return buffers_; }
  size_t activation_bytes() const { return acts_.bytes(); }
  int64_t num_parameters() const { return params_.numel(); }

  // GPT-2 init from `seed`: values are drawn in the stored (Hugging Face) shape and then
  // compacted, so the surviving weights do not depend on the plan.
  void init_weights(uint64_t seed);

  // Size the activation arena for micro-batches of B x T (allocates only when the shape grows
  // or changes; never inside a step that has the same shape).
  void reserve_activations(int64_t B, int64_t T);

  // Mean cross-entropy over the B*T targets (targets equal to cpu::kIgnoreTarget = -1 are left
  // out of the loss and the mean). With targets == nullptr only logits are computed.
  double forward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T);
  // forward, then accumulate into grads() the gradient of loss_scale * (mean loss of this
  // micro-batch). Returns the mean loss.
  double forward_backward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T, double loss_scale);
  void zero_grads();

  // After forward: logits [B*T, vocab] (targets == nullptr) and the fused QKV activations of
  // layer l [B*T, layouts()[l].qkv_width()] (after RoPE), which calibration reads.
  const F* logits() const;
  const F* layer_qkv(int l) const;
  const F* layer_attn_out(int l) const;

  // Gate-Taylor scores: when enabled, backward records d(loss)/d(gate) for a gate of 1 on each
  // head's output, per sequence: [layer][b * n_head + h].
  void record_gate_grads(bool on) { record_gates_ = on; }
  const std::vector<std::vector<double>>& gate_grads() const { return gate_grads_; }

  // Current static/linear head values (for checkpoints and plan changes).
  HeadExtras head_extras() const;
  // Change the plan in place: parameters of surviving rows keep their values, rows that
  // disappear are dropped, new static/linear heads take values from `extras` (defaults if
  // absent). Gradients are zeroed; activations are re-sized on the next step. Callers remap
  // optimizer state with remap_arena() using the old specs/layouts they saved before.
  void install_plan(const attn::HeadPlan& plan, const HeadExtras& extras);
  // Recompute static heads' row normalisers after their alpha/rho buffers were written.
  void refresh_static_normalisers();

 private:
  struct Impl;
  void build(const HeadExtras& extras);
  void forward_layers(const int32_t* inputs, int64_t B, int64_t T);
  void backward(double dloss_per_token);

  ModelConfig cfg_;
  const Backend<F>& ops_;
  std::vector<attn::LayerLayout> layouts_;
  std::vector<ParamSpec> specs_;
  Arena params_{"params"}, grads_{"grads"}, buffers_{"buffers"}, acts_{"activations"};
  std::unique_ptr<Impl> impl_;
  int64_t B_ = 0, T_ = 0;
  bool record_gates_ = false;
  std::vector<std::vector<double>> gate_grads_;
};

}  // namespace hw

#pragma once
// The model section of a config (and of a checkpoint's config.json).
#include <nlohmann/json.hpp>
#include <string>

#include "headwise/attention/head_plan.hpp"
#include "headwise/model/lora_config.hpp"

namespace hw {

// Upper bounds on the model keys (validate() refuses more): far above any model headwise can
// train, low enough that every size product of the model (B x T x T x n_head, vocab x n_embd,
// ...) fits in 64 bits, and that a hostile config.json is refused before anything is allocated.
struct ModelLimits {
  static constexpr int kMaxLayers = 1024;
  static constexpr int kMaxHeads = 1024;
  static constexpr int kMaxEmbd = 65536;
  static constexpr int kMaxHeadDim = 1024;
  static constexpr int kMaxPositions = 1 << 20;
  static constexpr int kMaxVocab = 65536;  // tokens are stored as uint16
};

struct ModelConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_kv_head = 0;  // 0 = n_head (multi-head attention); must divide n_head
  int n_embd = 256;
  int block_size = 256;  // n_positions
  int vocab_size = 256;
  std::string pos = "learned";  // "learned" (GPT-2 wpe) or "rope"
  double rope_theta = 10000.0;
  bool bias = true;  // GPT-2 has biases; the SAF paper's recipe has none
  double layer_norm_epsilon = 1e-5;
  double init_std = 0.02;
  // GPT-2 scales the residual output projections' init (attn.c_proj, mlp.c_proj) by
  // 1/sqrt(2 n_layer). false keeps init_std for them too: a 2-layer model trained from scratch on
  // MQAR leaves the recall plateau only without the scaling (measured in headwise and PyTorch).
  bool init_residual_scale = true;
  double linear_eps = 1e-6;  // epsilon of linear (OAL) heads
  attn::HeadPlan head_plan;  // empty = all softmax
  LoraConfig lora;           // adapters (lora_config.hpp); rank 0 = none

  int head_dim() const { return n_embd / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  bool rope() const { return pos == "rope"; }
  // Throws hw::Error on impossible shapes (names the keys involved). Fills an empty plan.
  void validate();

  static ModelConfig from_json(const nlohmann::json& section);  // strict: unknown keys are errors
  nlohmann::json to_json() const;
  // Hugging Face GPT-2 config.json (plus headwise keys) and back.
  nlohmann::json to_hf_config() const;
  static ModelConfig from_hf_config(const nlohmann::json& cfg, const std::string& path);
};

}  // namespace hw

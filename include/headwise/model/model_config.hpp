#pragma once
// The model section of a config (and of a checkpoint's config.json).
#include <nlohmann/json.hpp>
#include <optional>
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
  static constexpr int kMaxVocab = 2147483647;  // 2^31-1: token ids are int32 (32-bit shards above 65,536)
  static constexpr int kMaxIntermediate = 1 << 22;  // the SwiGLU MLP's width
};

// Llama 3's rotary frequency scaling (rope_scaling with rope_type "llama3"); type "" = none.
struct RopeScaling {
  std::string type;  // "" or "llama3"
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  bool operator==(const RopeScaling&) const = default;
  // null (none) or the Hugging Face object; from_json throws naming `what` and any other type.
  nlohmann::json to_json() const;
  static RopeScaling from_json(const nlohmann::json& j, const std::string& what);
};

// The decoder is one block written over these choices (model.cpp): GPT-2 is LayerNorm, GELU MLP
// (4x), learned positions, biases everywhere, tied head; the Llama family (llama, qwen2, qwen3)
// is RMSNorm, SwiGLU MLP, RoPE, with biases, q/k norm and the head per its Hugging Face class.
// `family` names the Hugging Face class the checkpoint is written as (hf_family.hpp) and gives
// the other keys their defaults (for_family); validate() refuses choices that class cannot hold.
struct ModelConfig {
  std::string family = "gpt2";  // "gpt2" | "llama" | "qwen2" | "qwen3"
  int n_layer = 4;
  int n_head = 4;
  int n_kv_head = 0;  // 0 = n_head (multi-head attention); must divide n_head
  int n_embd = 256;
  int block_size = 256;  // n_positions
  int vocab_size = 256;
  std::string pos = "learned";  // "learned" (GPT-2 wpe) or "rope"
  double rope_theta = 10000.0;
  bool bias = true;  // GPT-2 has biases; the SAF paper's recipe has none
  // Per-projection biases; unset = `bias`. q/k/v (Qwen2's), attention output, MLP.
  std::optional<bool> qkv_bias, out_bias, mlp_bias;
  std::string norm = "layernorm";  // "layernorm" (weight and bias) | "rmsnorm" (weight only)
  std::string mlp = "gelu";        // "gelu" (c_fc, tanh GELU, c_proj) | "swiglu" (gate, up, down)
  int intermediate_size = 0;       // MLP width; 0 = 4 n_embd
  int head_size = 0;               // JSON "head_dim"; 0 = n_embd / n_head (Qwen3 sets it apart)
  bool qk_norm = false;            // RMSNorm of each q and k head before RoPE (Qwen3)
  bool tie_word_embeddings = true; // LM head = wte; false: its own lm_head.weight [vocab, n_embd]
  RopeScaling rope_scaling;
  double layer_norm_epsilon = 1e-5;
  double init_std = 0.02;
  // GPT-2 scales the residual output projections' init (attn.c_proj, mlp.c_proj) by
  // 1/sqrt(2 n_layer). false keeps init_std for them too: a 2-layer model trained from scratch on
  // MQAR leaves the recall plateau only without the scaling (measured in headwise and PyTorch).
  bool init_residual_scale = true;
  double linear_eps = 1e-6;  // epsilon of linear (OAL) heads
  // GPT-2's dropout rates (its config.json names), in training forwards only (Model::forward_backward):
  // embd_pdrop on the embeddings (wte + wpe), resid_pdrop on each attention and MLP output
  // projection before its residual add. attn_pdrop (on attention probabilities) is read and
  // written but a trainable model refuses a non-zero value: no attention kind implements it yet.
  double resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0;
  attn::HeadPlan head_plan;  // empty = all softmax
  LoraConfig lora;           // adapters (lora_config.hpp); rank 0 = none

  int head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int intermediate() const { return intermediate_size > 0 ? intermediate_size : 4 * n_embd; }
  // Columns of the first MLP matrix: gate | up for SwiGLU.
  int fc_width() const { return swiglu() ? 2 * intermediate() : intermediate(); }
  bool rmsnorm() const { return norm == "rmsnorm"; }
  bool swiglu() const { return mlp == "swiglu"; }
  bool has_qkv_bias() const { return qkv_bias.value_or(bias); }
  bool has_out_bias() const { return out_bias.value_or(bias); }
  bool has_mlp_bias() const { return mlp_bias.value_or(bias); }
  // Any choice beyond GPT-2's ops (a backend needs has_llama_ops for it).
  bool needs_llama_ops() const { return rmsnorm() || swiglu() || qk_norm || !rope_scaling.type.empty(); }
  // The defaults of a family: GPT-2's, or RMSNorm, SwiGLU, RoPE, no biases (Qwen2: q/k/v biases;
  // Qwen3: q/k norm). Throws naming any other family.
  static ModelConfig for_family(const std::string& family);
  bool any_dropout() const { return resid_pdrop > 0 || embd_pdrop > 0; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  bool rope() const { return pos == "rope"; }
  // Throws hw::Error on impossible shapes (names the keys involved). Fills an empty plan.
  void validate();

  static ModelConfig from_json(const nlohmann::json& section);  // strict: unknown keys are errors
  // The model section of a run that starts from a checkpoint of this config (train --init-from):
  // this config's keys with `section`'s on top (model.lora's keys over the checkpoint's adapters,
  // when it has some). `section` may give only keys that leave the shape alone (head_plan, lora,
  // init_std, ...); a shape key it gives with another value than this config's is one error
  // naming both values and `who` (the checkpoint).
  nlohmann::json merged_section(const nlohmann::json& section, const std::string& who) const;
  nlohmann::json to_json() const;
  // Hugging Face config.json of the family's class (plus headwise keys) and back
  // (hf_family.cpp for the Llama family; model_type gpt2 here).
  nlohmann::json to_hf_config() const;
  static ModelConfig from_hf_config(const nlohmann::json& cfg, const std::string& path);
};

}  // namespace hw

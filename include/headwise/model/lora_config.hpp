#pragma once
// LoRA adapters on a layer's attention projections (config section `model.lora`).
//
// Each targeted projection P of a chosen layer gains a low-rank update, as in PEFT:
//   P(x) = x W + b + (alpha / rank) * dropout(x) A^T B^T,
// A: [rank, in] (Kaiming-uniform, bound 1/sqrt(in), PEFT's kaiming_uniform_(a = sqrt(5))),
// B: [out, rank] (zero), so a fresh adapter leaves the model's outputs unchanged.
// Targets are q, k, v (the three column blocks of GPT-2's fused c_attn, one adapter each) and o
// (c_proj). With freeze_base the model's own weights (embeddings, LayerNorms, projections, MLP)
// get no gradients and no optimizer state; adapters and head parameters (linear heads' L) train.
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hw {

struct ModelConfig;

enum class LoraTarget : int { Q = 0, K = 1, V = 2, O = 3 };
constexpr int kLoraTargets = 4;
const char* lora_target_name(LoraTarget t);  // "q", "k", "v", "o"

struct LoraConfig {
  int rank = 0;        // 0 = no adapters
  double alpha = 16.0;
  double dropout = 0.0;  // on the adapter's input, training forwards only
  std::vector<int> layers;  // empty = every layer
  std::array<bool, kLoraTargets> targets{true, true, true, true};
  bool freeze_base = false;

  bool enabled() const { return rank > 0; }
  bool on_layer(int l) const;
  bool targets_any_qkv() const { return targets[0] || targets[1] || targets[2]; }
  bool has(LoraTarget t) const { return targets[size_t(t)]; }
  double scaling() const { return alpha / rank; }
  // Throws hw::Error naming the model.lora key (rank above a targeted projection's smaller
  // dimension, a layer outside the model, dropout outside [0, 1), ...).
  void validate(const ModelConfig& model) const;

  // `model.lora`: {"rank", "alpha", "dropout", "layers", "targets", "freeze_base"}; strict.
  static LoraConfig from_json(const nlohmann::json& section);
  nlohmann::json to_json() const;
  bool operator==(const LoraConfig& o) const = default;
};

}  // namespace hw

#pragma once
// Small models for the cached-decoding tests: every head kind, MHA or GQA, learned or RoPE
// positions, with non-trivial static patterns and linear kernels and weights larger than GPT-2's
// init so every path carries signal. The independent reference is the training forward over the
// whole sequence (Model::forward + read_logits).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"

namespace hw::test {

struct InferCase {
  std::string name;
  int n_kv_head = 4;
  std::string pos = "learned";
  std::string plan;  // JSON
  // "gpt2" (LayerNorm, GELU, biases, tied head) or a Llama-family shape: "llama" (RMSNorm,
  // SwiGLU, no biases, untied head, Llama 3 RoPE scaling that bends some of the frequencies),
  // "qwen2" (llama + q/k/v biases), "qwen3" (llama + q/k RMSNorm and a head_dim apart from
  // n_embd / n_head). The Llama family implies RoPE.
  std::string family = "gpt2";
};

inline ModelConfig infer_config(const InferCase& c, int block_size = 40) {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_kv_head = c.n_kv_head;
  cfg.n_embd = 32;  // head_dim 8
  cfg.vocab_size = 29;
  cfg.block_size = block_size;
  cfg.pos = c.pos;
  cfg.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(c.plan));
  if (c.family != "gpt2") {
    cfg.family = c.family;
    cfg.pos = "rope";
    cfg.norm = "rmsnorm";
    cfg.mlp = "swiglu";
    cfg.intermediate_size = 48;
    cfg.bias = false;
    cfg.tie_word_embeddings = false;
    cfg.rope_theta = 500.0;  // with 8 positions of "original" context, scaling bends the low frequencies
    cfg.rope_scaling.type = "llama3";
    cfg.rope_scaling.factor = 4.0;
    cfg.rope_scaling.original_max_position_embeddings = 8;
    if (c.family == "qwen2") cfg.qkv_bias = true;
    if (c.family == "qwen3") {
      cfg.qk_norm = true;
      cfg.head_size = 12;  // q width 48, not n_embd
    }
  }
  cfg.validate();
  return cfg;
}

inline std::unique_ptr<Model<float>> infer_model(const ModelConfig& cfg, uint64_t seed = 5) {
  HeadExtras extras;
  Rng rng(seed * 31 + 1);
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const auto kind = cfg.head_plan.layers[size_t(l)][size_t(h)].kind;
      if (kind == attn::HeadKind::Static) {
        StaticHeadValues v = default_static_values(cfg.block_size);
        for (auto& a : v.alpha) a = float(0.7 * rng.normal());
        for (auto& r : v.rho) r = float(0.7 * rng.normal());
        extras.statics[{l, h}] = v;
      } else if (kind == attn::HeadKind::Linear) {
        LinearHeadValues v;
        v.n_groups = 2;
        v.L.assign(9, 0.f);
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b <= a; ++b) v.L[size_t(a * 3 + b)] = float(0.6 * rng.normal());
        for (int r = 0; r < cfg.head_dim(); ++r) v.groups.push_back(1 + r % 2);
        extras.linears[{l, h}] = v;
      }
    }
  auto m = std::make_unique<Model<float>>(cfg, cpu_backend<float>(), extras);
  m->init_weights(seed);
  for (const auto& t : m->params().tensors()) {
    if (t->name.find(".linear.") != std::string::npos) continue;  // keep L as drawn above
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] += float(0.1 * rng.normal());
  }
  return m;
}

inline std::vector<int32_t> random_tokens(int64_t n, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> x(static_cast<size_t>(n));
  for (auto& v : x) v = int32_t(rng.below(uint64_t(vocab)));
  return x;
}

// Logits [T, vocab] of the training forward over the whole sequence.
inline std::vector<float> full_forward_logits(Model<float>& m, const std::vector<int32_t>& tokens) {
  m.forward(tokens.data(), nullptr, 1, int64_t(tokens.size()));
  std::vector<float> out;
  m.read_logits(out);
  return out;
}

}  // namespace hw::test

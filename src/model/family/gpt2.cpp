// GPT-2 (GPT2LMHeadModel): LayerNorm, GELU MLP of 4 n_embd, learned positions, all biases or
// none, a tied LM head. headwise's own choices (GQA, RoPE, no biases) travel as headwise_* keys,
// which transformers ignores. Its tensors keep headwise's in-memory names (the same layout).
#include <cstdint>
#include <utility>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "model/family/family.hpp"

namespace hw {

namespace {

constexpr int kGpt2EndOfText = 50256;  // transformers' GPT2Config default for bos/eos

void gpt2_validate(const ModelConfig& c, const std::string& who) {
  auto need = [&](bool ok, const std::string& what) { check(ok, who + " " + what); };
  const std::string other = ": use family llama, qwen2 or qwen3 for the Llama-style choices";
  need(!c.rmsnorm(), "has no RMSNorm (model.norm = rmsnorm)" + other);
  need(!c.swiglu(), "has no SwiGLU MLP (model.mlp = swiglu)" + other);
  need(!c.qk_norm, "has no q/k norm (model.qk_norm)" + other);
  need(c.rope_scaling.type.empty(), "has no rope_scaling" + other);
  need(c.tie_word_embeddings, "ties its LM head to wte (model.tie_word_embeddings must be true)" + other);
  need(c.intermediate() == 4 * c.n_embd, "has an MLP of 4 n_embd (model.intermediate_size " +
                                             std::to_string(c.intermediate()) + ")" + other);
  need(int64_t(c.head_dim()) * c.n_head == c.n_embd,
       "has head_dim = n_embd / n_head (model.head_dim " + std::to_string(c.head_dim()) + ")" + other);
  need(c.has_qkv_bias() == c.bias && c.has_out_bias() == c.bias && c.has_mlp_bias() == c.bias,
       "has all biases or none (model.bias; qkv_bias, out_bias and mlp_bias must equal it)" + other);
}

nlohmann::json gpt2_to_hf_config(const ModelConfig& c) {
  nlohmann::json j = {{"vocab_size", c.vocab_size},
                      {"n_positions", c.block_size},
                      {"n_ctx", c.block_size},
                      {"n_embd", c.n_embd},
                      {"n_layer", c.n_layer},
                      {"n_head", c.n_head},
                      {"n_inner", nullptr},
                      {"activation_function", "gelu_new"},
                      {"layer_norm_epsilon", c.layer_norm_epsilon},
                      {"initializer_range", c.init_std},
                      {"resid_pdrop", c.resid_pdrop},
                      {"embd_pdrop", c.embd_pdrop},
                      {"attn_pdrop", c.attn_pdrop},
                      {"tie_word_embeddings", true},
                      {"scale_attn_weights", true},
                      // headwise keys (ignored by transformers)
                      {"headwise_n_kv_head", c.kv_heads()},
                      {"headwise_pos", c.pos},
                      {"headwise_rope_theta", c.rope_theta},
                      {"headwise_bias", c.bias},
                      {"linear_eps", c.linear_eps},
                      {"head_plan", c.head_plan.to_json()}};
  // The adapters themselves are in adapter_model.safetensors (PEFT names); transformers reads
  // model.safetensors as the base model.
  if (c.lora.enabled()) j["headwise_lora"] = c.lora.to_json();
  // Without these keys transformers assumes GPT-2's <|endoftext|> (50256), which a smaller
  // vocabulary (the byte tokenizer's 256) does not have: it warns on every load.
  if (c.vocab_size <= kGpt2EndOfText) j["bos_token_id"] = j["eos_token_id"] = nullptr;
  set_hf_model_type(j, c);
  return j;
}

ModelConfig gpt2_from_hf_config(const nlohmann::json& j, const std::string& path) {
  // Checked reads: a wrong type or an integer outside int is one error naming the key.
  const std::string w = path + ": config.json key ";
  auto int_of = [&](const char* key) { return int(json_int(j[key], w + "'" + key + "'", INT32_MIN, INT32_MAX)); };
  auto need_int = [&](const char* key) -> int {
    check(j.contains(key), path + ": config.json needs integer key '" + key + "'");
    return int_of(key);
  };
  ModelConfig c;
  c.vocab_size = need_int("vocab_size");
  c.block_size = need_int("n_positions");
  c.n_embd = need_int("n_embd");
  c.n_layer = need_int("n_layer");
  c.n_head = need_int("n_head");
  if (j.contains("layer_norm_epsilon")) c.layer_norm_epsilon = json_number(j["layer_norm_epsilon"], w + "'layer_norm_epsilon'");
  if (j.contains("initializer_range")) c.init_std = json_number(j["initializer_range"], w + "'initializer_range'");
  if (j.contains("activation_function"))
    check(j["activation_function"] == "gelu_new" || j["activation_function"] == "gelu_pytorch_tanh",
          path + ": only the tanh GELU (gelu_new) is supported, got " + json_brief(j["activation_function"]));
  if (j.contains("n_inner") && !j["n_inner"].is_null())
    check(int64_t(int_of("n_inner")) == 4 * int64_t(c.n_embd), path + ": n_inner must be 4 * n_embd");
  if (j.contains("headwise_n_kv_head")) c.n_kv_head = int_of("headwise_n_kv_head");
  if (j.contains("headwise_pos")) c.pos = json_string(j["headwise_pos"], w + "'headwise_pos'");
  if (j.contains("headwise_rope_theta")) c.rope_theta = json_number(j["headwise_rope_theta"], w + "'headwise_rope_theta'");
  if (j.contains("headwise_bias")) c.bias = json_bool(j["headwise_bias"], w + "'headwise_bias'");
  if (j.contains("linear_eps")) c.linear_eps = json_number(j["linear_eps"], w + "'linear_eps'");
  for (const auto& [key, rate] : {std::pair<const char*, double*>{"resid_pdrop", &c.resid_pdrop},
                                  {"embd_pdrop", &c.embd_pdrop},
                                  {"attn_pdrop", &c.attn_pdrop}})
    if (j.contains(key) && !j[key].is_null()) *rate = json_number(j[key], w + "'" + key + "'");
  try {
    if (j.contains("head_plan")) c.head_plan = attn::HeadPlan::from_json(j["head_plan"]);
    if (j.contains("headwise_lora")) c.lora = LoraConfig::from_json(j["headwise_lora"]);
    c.validate();
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
  return c;
}

std::vector<HfTensor> gpt2_hf_tensors(const ModelConfig&, const ParamSpec& s) {
  const int64_t cols = s.stored_shape.empty() ? 1 : s.stored_shape.back();
  return {{s.name, s.stored_shape, 0, cols, false}};
}

// transformers' GPT2 modules: q|k|v fused in attn.c_attn, Conv1D weights [in, out]. target_modules
// names the output projection "attn.c_proj" ("c_proj" would match mlp.c_proj too).
std::vector<HfModule> gpt2_lora_modules(int l) {
  const std::string p = "transformer.h." + std::to_string(l) + ".";
  return {{p + "attn.c_attn", int(LoraTarget::Q), "c_attn"},
          {p + "attn.c_proj", int(LoraTarget::O), "attn.c_proj"},
          {p + "mlp.c_fc", -1, "c_fc"},
          {p + "mlp.c_proj", -1, "mlp.c_proj"}};
}

}  // namespace

extern const ModelFamily kGpt2Family;
const ModelFamily kGpt2Family = {"gpt2",
                                 "GPT2LMHeadModel",
                                 [](ModelConfig&) {},
                                 gpt2_validate,
                                 gpt2_to_hf_config,
                                 gpt2_from_hf_config,
                                 gpt2_hf_tensors,
                                 gpt2_lora_modules,
                                 /*fused_qkv=*/true,
                                 /*layers_pattern=*/"h"};

}  // namespace hw

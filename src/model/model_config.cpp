#include "headwise/model/model_config.hpp"

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw {

void ModelConfig::validate() {
  auto in_range = [](int v, int hi, const char* key) {
    check(v > 0 && v <= hi,
          std::string("model.") + key + " must be in 1.." + std::to_string(hi) + ", got " + std::to_string(v));
  };
  using M = ModelLimits;
  in_range(n_layer, M::kMaxLayers, "n_layer");
  in_range(n_head, M::kMaxHeads, "n_head");
  in_range(n_embd, M::kMaxEmbd, "n_embd");
  in_range(block_size, M::kMaxPositions, "block_size");
  check(vocab_size <= M::kMaxVocab, "model.vocab_size must be <= 65536 (tokens are stored as uint16)");
  in_range(vocab_size, M::kMaxVocab, "vocab_size");
  check(n_kv_head >= 0, "model.n_kv_head must be >= 0");
  check(n_embd % n_head == 0, "model.n_embd (" + std::to_string(n_embd) + ") must be divisible by model.n_head (" +
                                  std::to_string(n_head) + ")");
  check(head_dim() <= M::kMaxHeadDim, "model.n_embd / model.n_head (the head dimension, " + std::to_string(head_dim()) +
                                          ") must be at most " + std::to_string(M::kMaxHeadDim));
  check(n_head % kv_heads() == 0, "model.n_kv_head (" + std::to_string(kv_heads()) + ") must divide model.n_head (" +
                                      std::to_string(n_head) + ")");
  check(pos == "learned" || pos == "rope", "model.pos must be \"learned\" or \"rope\", got \"" + text_brief(pos) + "\"");
  if (rope()) {
    check(head_dim() % 2 == 0, "model.pos = rope needs an even head dimension, got " + std::to_string(head_dim()));
    check(rope_theta > 0, "model.rope_theta must be positive");
  }
  check(layer_norm_epsilon > 0, "model.layer_norm_epsilon must be positive");
  check(linear_eps > 0, "model.linear_eps must be positive");
  if (head_plan.layers.empty()) head_plan = attn::HeadPlan::uniform(n_layer, n_head);
  head_plan.validate(n_layer, n_head);
  lora.validate(*this);
}

ModelConfig ModelConfig::from_json(const nlohmann::json& section) {
  ModelConfig c;
  JsonFields f(section, "model");
  f.get("n_layer", c.n_layer);
  f.get("n_head", c.n_head);
  f.get("n_kv_head", c.n_kv_head);
  f.get("n_embd", c.n_embd);
  f.get("block_size", c.block_size);
  f.get("vocab_size", c.vocab_size);
  f.get("pos", c.pos);
  f.get("rope_theta", c.rope_theta);
  f.get("bias", c.bias);
  f.get("layer_norm_epsilon", c.layer_norm_epsilon);
  f.get("init_std", c.init_std);
  f.get("init_residual_scale", c.init_residual_scale);
  f.get("linear_eps", c.linear_eps);
  if (auto* plan = f.raw("head_plan")) c.head_plan = attn::HeadPlan::from_json(*plan);
  if (auto* lora = f.raw("lora")) c.lora = LoraConfig::from_json(*lora);
  f.finish();
  c.validate();
  return c;
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {{"n_layer", n_layer},   {"n_head", n_head},         {"n_kv_head", kv_heads()},
          {"n_embd", n_embd},     {"block_size", block_size}, {"vocab_size", vocab_size},
          {"pos", pos},           {"rope_theta", rope_theta}, {"bias", bias},
          {"layer_norm_epsilon", layer_norm_epsilon},         {"init_std", init_std},
          {"init_residual_scale", init_residual_scale},
          {"linear_eps", linear_eps},                         {"head_plan", head_plan.to_json()}};
  if (lora.enabled()) j["lora"] = lora.to_json();
  return j;
}

namespace {
constexpr int kGpt2EndOfText = 50256;  // transformers' GPT2Config default for bos/eos
}  // namespace

nlohmann::json ModelConfig::to_hf_config() const {
  nlohmann::json j = {{"model_type", "gpt2"},
                      {"architectures", {"GPT2LMHeadModel"}},
                      {"vocab_size", vocab_size},
                      {"n_positions", block_size},
                      {"n_ctx", block_size},
                      {"n_embd", n_embd},
                      {"n_layer", n_layer},
                      {"n_head", n_head},
                      {"n_inner", nullptr},
                      {"activation_function", "gelu_new"},
                      {"layer_norm_epsilon", layer_norm_epsilon},
                      {"initializer_range", init_std},
                      {"resid_pdrop", 0.0},
                      {"embd_pdrop", 0.0},
                      {"attn_pdrop", 0.0},
                      {"tie_word_embeddings", true},
                      {"scale_attn_weights", true},
                      // headwise keys (ignored by transformers)
                      {"headwise_n_kv_head", kv_heads()},
                      {"headwise_pos", pos},
                      {"headwise_rope_theta", rope_theta},
                      {"headwise_bias", bias},
                      {"linear_eps", linear_eps},
                      {"head_plan", head_plan.to_json()}};
  // The adapters themselves are in adapter_model.safetensors (PEFT names); transformers reads
  // model.safetensors as the base model.
  if (lora.enabled()) j["headwise_lora"] = lora.to_json();
  // Without these keys transformers assumes GPT-2's <|endoftext|> (50256), which a smaller
  // vocabulary (the byte tokenizer's 256) does not have: it warns on every load.
  if (vocab_size <= kGpt2EndOfText) j["bos_token_id"] = j["eos_token_id"] = nullptr;
  return j;
}

ModelConfig ModelConfig::from_hf_config(const nlohmann::json& j, const std::string& path) {
  check(j.is_object(), path + ": config.json is not a JSON object");
  // Checked reads: a wrong type or an integer outside int is one error naming the key.
  const std::string w = path + ": config.json key ";
  auto int_of = [&](const char* key) { return int(json_int(j[key], w + "'" + key + "'", INT32_MIN, INT32_MAX)); };
  auto need_int = [&](const char* key) -> int {
    check(j.contains(key), path + ": config.json needs integer key '" + key + "'");
    return int_of(key);
  };
  if (j.contains("model_type"))
    check(j["model_type"] == "gpt2", path + ": model_type must be \"gpt2\", got " + json_brief(j["model_type"]));
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
  try {
    if (j.contains("head_plan")) c.head_plan = attn::HeadPlan::from_json(j["head_plan"]);
    if (j.contains("headwise_lora")) c.lora = LoraConfig::from_json(j["headwise_lora"]);
    c.validate();
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
  return c;
}

}  // namespace hw

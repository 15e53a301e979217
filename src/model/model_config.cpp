#include "headwise/model/model_config.hpp"

#include <utility>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/model/hf_family.hpp"
#include "model/family/family.hpp"

namespace hw {

namespace {
// A number or bool as written (short by nature), anything else as a brief.
std::string value_text(const nlohmann::json& v) {
  return v.is_number() || v.is_boolean() ? v.dump() : json_brief(v);
}
}  // namespace

nlohmann::json RopeScaling::to_json() const {
  if (type.empty()) return nullptr;
  return {{"rope_type", type},
          {"factor", factor},
          {"low_freq_factor", low_freq_factor},
          {"high_freq_factor", high_freq_factor},
          {"original_max_position_embeddings", original_max_position_embeddings}};
}

RopeScaling RopeScaling::from_json(const nlohmann::json& j, const std::string& what) {
  RopeScaling r;
  if (j.is_null()) return r;
  check(j.is_object(), what + ": expected an object or null, got " + json_brief(j));
  // Hugging Face spells the type "rope_type" (older files: "type").
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  check(j.contains(type_key) && j[type_key].is_string(), what + ": needs a \"rope_type\" string");
  const std::string type = j[type_key].get<std::string>();
  if (type == "default") return r;
  check(type == "llama3", what + ": rope_type \"" + text_brief(type) +
                              "\" is not supported (only \"llama3\" scaling, or \"default\" = none)");
  r.type = type;
  auto num = [&](const char* key, double& out) {
    if (!j.contains(key)) return;
    check(j[key].is_number(), what + "." + key + ": expected a number, got " + json_brief(j[key]));
    out = j[key].get<double>();
  };
  num("factor", r.factor);
  num("low_freq_factor", r.low_freq_factor);
  num("high_freq_factor", r.high_freq_factor);
  if (j.contains("original_max_position_embeddings")) {
    const auto& v = j["original_max_position_embeddings"];
    check(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (int64_t(1) << 30),
          what + ".original_max_position_embeddings: expected a positive integer, got " + json_brief(v));
    r.original_max_position_embeddings = v.get<int>();
  }
  check(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor,
        what + ": llama3 scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  return r;
}

ModelConfig ModelConfig::for_family(const std::string& family) {
  ModelConfig c;
  const ModelFamily& f = family_named(family);
  c.family = family;
  f.set_defaults(c);
  return c;
}

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
  in_range(vocab_size, M::kMaxVocab, "vocab_size");
  check(n_kv_head >= 0, "model.n_kv_head must be >= 0");
  check(head_size >= 0 && head_size <= M::kMaxHeadDim,
        "model.head_dim must be in 0.." + std::to_string(M::kMaxHeadDim) + " (0 = n_embd / n_head), got " +
            std::to_string(head_size));
  check(intermediate_size >= 0 && intermediate_size <= M::kMaxIntermediate,
        "model.intermediate_size must be in 0.." + std::to_string(M::kMaxIntermediate) + " (0 = 4 n_embd), got " +
            std::to_string(intermediate_size));
  check(head_size > 0 || n_embd % n_head == 0, "model.n_embd (" + std::to_string(n_embd) +
                                                   ") must be divisible by model.n_head (" + std::to_string(n_head) +
                                                   ") unless model.head_dim is given");
  check(head_dim() <= M::kMaxHeadDim, "model.n_embd / model.n_head (the head dimension, " + std::to_string(head_dim()) +
                                          ") must be at most " + std::to_string(M::kMaxHeadDim));
  check(norm == "layernorm" || norm == "rmsnorm",
        "model.norm must be \"layernorm\" or \"rmsnorm\", got \"" + text_brief(norm) + "\"");
  check(mlp == "gelu" || mlp == "swiglu", "model.mlp must be \"gelu\" or \"swiglu\", got \"" + text_brief(mlp) + "\"");
  check(int64_t(n_head) * head_dim() <= (int64_t(1) << 24) && int64_t(fc_width()) <= (int64_t(1) << 28),
        "model: n_head x head_dim or the MLP width is implausibly large");
  check(n_head % kv_heads() == 0, "model.n_kv_head (" + std::to_string(kv_heads()) + ") must divide model.n_head (" +
                                      std::to_string(n_head) + ")");
  check(pos == "learned" || pos == "rope", "model.pos must be \"learned\" or \"rope\", got \"" + text_brief(pos) + "\"");
  if (rope()) {
    check(head_dim() % 2 == 0, "model.pos = rope needs an even head dimension, got " + std::to_string(head_dim()));
    check(rope_theta > 0, "model.rope_theta must be positive");
  }
  check(rope() || rope_scaling.type.empty(), "model.rope_scaling needs model.pos = \"rope\"");
  validate_family(*this);
  check(layer_norm_epsilon > 0, "model.layer_norm_epsilon must be positive");
  check(linear_eps > 0, "model.linear_eps must be positive");
  for (const auto& [key, rate] : {std::pair<const char*, double>{"resid_pdrop", resid_pdrop},
                                  {"embd_pdrop", embd_pdrop},
                                  {"attn_pdrop", attn_pdrop}})
    check(rate >= 0 && rate < 1, std::string("model.") + key + " must be in [0, 1), got " + std::to_string(rate));
  if (head_plan.layers.empty()) head_plan = attn::HeadPlan::uniform(n_layer, n_head);
  head_plan.validate(n_layer, n_head);
  lora.validate(*this);
}

ModelConfig ModelConfig::from_json(const nlohmann::json& section) {
  check(section.is_object(), "model: expected an object");
  std::string family = "gpt2";
  if (section.contains("family")) {
    check(section["family"].is_string(), "model.family: expected a string, got " + json_brief(section["family"]));
    family = section["family"].get<std::string>();
  }
  ModelConfig c = for_family(family);
  JsonFields f(section, "model");
  f.get("family", c.family);
  f.get("n_layer", c.n_layer);
  f.get("n_head", c.n_head);
  f.get("n_kv_head", c.n_kv_head);
  f.get("n_embd", c.n_embd);
  f.get("block_size", c.block_size);
  f.get("vocab_size", c.vocab_size);
  f.get("pos", c.pos);
  f.get("rope_theta", c.rope_theta);
  f.get("bias", c.bias);
  auto optional_bool = [&](const char* key, std::optional<bool>& out) {
    if (const auto* v = f.raw(key)) {
      check(v->is_boolean(), std::string("model.") + key + ": expected true or false, got " + json_brief(*v));
      out = v->get<bool>();
    }
  };
  optional_bool("qkv_bias", c.qkv_bias);
  optional_bool("out_bias", c.out_bias);
  optional_bool("mlp_bias", c.mlp_bias);
  f.get("norm", c.norm);
  f.get("mlp", c.mlp);
  f.get("intermediate_size", c.intermediate_size);
  f.get("head_dim", c.head_size);
  f.get("qk_norm", c.qk_norm);
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  if (const auto* r = f.raw("rope_scaling")) c.rope_scaling = RopeScaling::from_json(*r, "model.rope_scaling");
  f.get("layer_norm_epsilon", c.layer_norm_epsilon);
  f.get("init_std", c.init_std);
  f.get("init_residual_scale", c.init_residual_scale);
  f.get("linear_eps", c.linear_eps);
  f.get("resid_pdrop", c.resid_pdrop);
  f.get("embd_pdrop", c.embd_pdrop);
  f.get("attn_pdrop", c.attn_pdrop);
  if (auto* plan = f.raw("head_plan")) c.head_plan = attn::HeadPlan::from_json(*plan);
  if (auto* lora = f.raw("lora")) c.lora = LoraConfig::from_json(*lora);
  f.finish();
  c.validate();
  return c;
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {{"family", family},     {"n_layer", n_layer},   {"n_head", n_head},         {"n_kv_head", kv_heads()},
          {"n_embd", n_embd},     {"block_size", block_size}, {"vocab_size", vocab_size},
          {"pos", pos},           {"rope_theta", rope_theta}, {"bias", bias},
          {"layer_norm_epsilon", layer_norm_epsilon},         {"init_std", init_std},
          {"init_residual_scale", init_residual_scale},
          {"linear_eps", linear_eps},                         {"head_plan", head_plan.to_json()}};
  // The Llama-family choices, written when they leave GPT-2's (a GPT-2 run's config stays as it was).
  if (family != "gpt2" || needs_llama_ops() || head_size > 0 || intermediate_size > 0 || !tie_word_embeddings ||
      qkv_bias || out_bias || mlp_bias) {
    j["qkv_bias"] = has_qkv_bias();
    j["out_bias"] = has_out_bias();
    j["mlp_bias"] = has_mlp_bias();
    j["norm"] = norm;
    j["mlp"] = mlp;
    j["intermediate_size"] = intermediate();
    j["head_dim"] = head_dim();
    j["qk_norm"] = qk_norm;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["rope_scaling"] = rope_scaling.to_json();
  }
  if (lora.enabled()) j["lora"] = lora.to_json();
  // Written when set, so a run without dropout keeps the config it always had.
  if (any_dropout() || attn_pdrop > 0) {
    j["resid_pdrop"] = resid_pdrop;
    j["embd_pdrop"] = embd_pdrop;
    j["attn_pdrop"] = attn_pdrop;
  }
  return j;
}

nlohmann::json ModelConfig::merged_section(const nlohmann::json& section, const std::string& who) const {
  nlohmann::json merged = to_json();
  if (section.is_null()) return merged;
  check(section.is_object(), "model: expected an object");
  static const char* const kFree[] = {"head_plan",  "lora",        "init_std",   "init_residual_scale",
                                      "linear_eps", "resid_pdrop", "embd_pdrop", "attn_pdrop"};
  for (auto it = section.begin(); it != section.end(); ++it) {
    const std::string& key = it.key();
    bool free = false;
    for (const char* k : kFree) free = free || key == k;
    // n_kv_head 0 means "as many as n_head".
    const nlohmann::json mine = key == "n_kv_head" && it.value() == 0 ? nlohmann::json(n_head) : it.value();
    if (!free && merged.contains(key) && merged[key] != mine)
      fail("model." + key + ": the config's " + value_text(it.value()) + " does not match " + value_text(merged[key]) +
           " of " + who + " (give only keys that leave the model's shape alone, or none)");
    if (key == "lora" && merged.contains("lora") && merged["lora"].is_object() && it.value().is_object()) {
      // Keys over the checkpoint's adapters (dropout, freeze_base: the run's choice).
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv) merged["lora"][kv.key()] = kv.value();
      continue;
    }
    merged[key] = it.value();
  }
  return merged;
}

nlohmann::json ModelConfig::to_hf_config() const { return family_named(family).to_hf_config(*this); }

ModelConfig ModelConfig::from_hf_config(const nlohmann::json& j, const std::string& path) {
  check(j.is_object(), path + ": config.json is not a JSON object");
  if (!j.contains("model_type")) return family_named("gpt2").from_hf_config(j, path);  // older GPT-2 files
  const nlohmann::json& type = j["model_type"];
  if (type == "headwise") return from_hf_config(family_hf_config(j, path), path);
  const ModelFamily* f = type.is_string() ? find_family(type.get<std::string>()) : nullptr;
  check(f != nullptr, path + ": model_type \"" + (type.is_string() ? type.get<std::string>() : json_brief(type)) +
                          "\" is not supported (" + family_names("", ", ") + " and headwise are)");
  return f->from_hf_config(j, path);
}

}  // namespace hw

// The Llama-style classes' shared part (llama_family.hpp).
#include "model/family/llama_family.hpp"

#include <cstdint>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw {

namespace {
std::string yes(bool b) { return b ? "true" : "false"; }
}  // namespace

void llama_set_defaults(const LlamaVariant& v, ModelConfig& c) {
  c.norm = "rmsnorm";
  c.mlp = "swiglu";
  c.pos = "rope";
  c.bias = false;
  c.layer_norm_epsilon = 1e-6;
  if (v.biases == LlamaVariant::Biases::QkvAlways) c.qkv_bias = true;
  if (v.qk_norm) c.qk_norm = true;
}

void llama_validate(const LlamaVariant& v, const ModelConfig& c, const std::string& who) {
  auto need = [&](bool ok, const std::string& what) { check(ok, who + " " + what); };
  need(c.rmsnorm(), "needs model.norm = \"rmsnorm\", got \"" + c.norm + "\"");
  need(c.swiglu(), "needs model.mlp = \"swiglu\", got \"" + c.mlp + "\"");
  need(c.rope(), "needs model.pos = \"rope\", got \"" + c.pos + "\"");
  if (v.qk_norm)
    need(c.qk_norm, "normalises q and k (model.qk_norm must be true)");
  else
    need(!c.qk_norm, "has no q/k norm (model.qk_norm must be false; family qwen3 has it)");
  if (v.biases == LlamaVariant::Biases::QkvAlways) {
    need(c.has_qkv_bias(), "has q/k/v biases (model.qkv_bias must be true)");
    need(!c.has_out_bias(), "has no attention output bias (model.out_bias must be false)");
    need(!c.has_mlp_bias(), "has no MLP biases (model.mlp_bias must be false)");
    return;
  }
  // attention_bias covers q, k, v and o together.
  need(c.has_qkv_bias() == c.has_out_bias(), "has one attention_bias for q, k, v and o (model.qkv_bias " +
                                                 yes(c.has_qkv_bias()) + " and model.out_bias " +
                                                 yes(c.has_out_bias()) + " must agree)");
  if (v.biases == LlamaVariant::Biases::Attention)
    need(!c.has_mlp_bias(), "has no MLP biases (model.mlp_bias must be false)");
}

nlohmann::json llama_to_hf_config(const LlamaVariant& v, const ModelConfig& c) {
  nlohmann::json j = {{"vocab_size", c.vocab_size},
                      {"hidden_size", c.n_embd},
                      {"intermediate_size", c.intermediate()},
                      {"num_hidden_layers", c.n_layer},
                      {"num_attention_heads", c.n_head},
                      {"num_key_value_heads", c.kv_heads()},
                      {"head_dim", c.head_dim()},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", c.block_size},
                      {"initializer_range", c.init_std},
                      {"rms_norm_eps", c.layer_norm_epsilon},
                      {"use_cache", true},
                      {"tie_word_embeddings", c.tie_word_embeddings},
                      {"rope_theta", c.rope_theta},
                      {"rope_scaling", c.rope_scaling.to_json()},
                      {"attention_dropout", 0.0},
                      {"torch_dtype", "float32"},
                      {"bos_token_id", nullptr},
                      {"eos_token_id", nullptr},
                      // headwise keys (ignored by transformers)
                      {"linear_eps", c.linear_eps},
                      {"head_plan", c.head_plan.to_json()}};
  if (v.biases != LlamaVariant::Biases::QkvAlways) j["attention_bias"] = c.has_qkv_bias();
  if (v.biases == LlamaVariant::Biases::AttentionAndMlp) j["mlp_bias"] = c.has_mlp_bias();
  if (v.sliding_window_keys) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layer;
  }
  if (c.lora.enabled()) j["headwise_lora"] = c.lora.to_json();
  set_hf_model_type(j, c);
  return j;
}

ModelConfig llama_from_hf_config(const LlamaVariant& v, const nlohmann::json& j, const std::string& path) {
  ModelConfig c = ModelConfig::for_family(j["model_type"].get<std::string>());
  auto need_int = [&](const char* key, int64_t max) -> int {
    check(j.contains(key), path + ": config.json needs integer key '" + key + "'");
    return int(json_int(j[key], path + ": " + key, 1, max));
  };
  auto opt_num = [&](const char* key, double& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    check(j[key].is_number(), path + ": " + key + " must be a number, got " + json_brief(j[key]));
    out = j[key].get<double>();
  };
  auto opt_bool = [&](const char* key, bool dflt) {
    if (!j.contains(key) || j[key].is_null()) return dflt;
    check(j[key].is_boolean(), path + ": " + key + " must be true or false, got " + json_brief(j[key]));
    return j[key].get<bool>();
  };
  constexpr int64_t kMaxDim = int64_t(1) << 20, kMaxVocab = (int64_t(1) << 31) - 1;
  c.vocab_size = need_int("vocab_size", kMaxVocab);
  c.n_embd = need_int("hidden_size", kMaxDim);
  c.n_layer = need_int("num_hidden_layers", 4096);
  c.n_head = need_int("num_attention_heads", 4096);
  c.intermediate_size = need_int("intermediate_size", kMaxDim);
  c.block_size = need_int("max_position_embeddings", int64_t(1) << 30);
  c.n_kv_head = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                    ? need_int("num_key_value_heads", 4096)
                    : c.n_head;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) c.head_size = need_int("head_dim", kMaxDim);
  if (j.contains("hidden_act"))
    check(j["hidden_act"] == "silu", path + ": hidden_act must be \"silu\" (SwiGLU), got " + json_brief(j["hidden_act"]));
  opt_num("rms_norm_eps", c.layer_norm_epsilon);
  opt_num("initializer_range", c.init_std);
  // The classes' default is an untied head.
  c.tie_word_embeddings = opt_bool("tie_word_embeddings", false);
  if (v.biases != LlamaVariant::Biases::QkvAlways) {
    const bool ab = opt_bool("attention_bias", false);
    c.qkv_bias = c.out_bias = ab;
  }
  if (v.biases == LlamaVariant::Biases::AttentionAndMlp) c.mlp_bias = opt_bool("mlp_bias", false);
  if (v.sliding_window_keys)
    check(!opt_bool("use_sliding_window", false),
          path + ": use_sliding_window = true (Qwen's sliding-window layers) is not supported");
  // RoPE: rope_theta + rope_scaling (transformers 4), or one rope_parameters object (5).
  opt_num("rope_theta", c.rope_theta);
  try {
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
      const auto& rp = j["rope_parameters"];
      if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) c.rope_theta = rp["rope_theta"].get<double>();
      c.rope_scaling = RopeScaling::from_json(rp, "rope_parameters");
    } else if (j.contains("rope_scaling")) {
      c.rope_scaling = RopeScaling::from_json(j["rope_scaling"], "rope_scaling");
    }
    if (j.contains("linear_eps")) c.linear_eps = j["linear_eps"].get<double>();
    if (j.contains("head_plan")) c.head_plan = attn::HeadPlan::from_json(j["head_plan"]);
    if (j.contains("headwise_lora")) c.lora = LoraConfig::from_json(j["headwise_lora"]);
    c.validate();
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    fail(path + ": " + e.what());
  }
  return c;
}

std::vector<HfTensor> llama_hf_tensors(const ModelConfig& c, const ParamSpec& s) {
  const auto& shp = s.stored_shape;
  const int64_t cols = shp.empty() ? 1 : shp.back();
  auto same = [&](const std::string& name) { return std::vector<HfTensor>{{name, shp, 0, cols, false}}; };
  if (s.name == "wte.weight") return same("model.embed_tokens.weight");
  if (s.name == "lm_head.weight") return same("lm_head.weight");
  if (s.name == "ln_f.weight") return same("model.norm.weight");
  if (s.layer < 0 || s.adapter) return same(s.name);
  const std::string p = "h." + std::to_string(s.layer) + ".";
  if (s.name.rfind(p, 0) != 0) return same(s.name);
  const std::string rest = s.name.substr(p.size());
  const std::string hp = "model.layers." + std::to_string(s.layer) + ".";
  const int64_t C = c.n_embd, hd = c.head_dim(), q = int64_t(c.n_head) * hd, kv = int64_t(c.kv_heads()) * hd,
                I = c.intermediate();
  // A Linear's weight [out, in] from stored columns [col0, col0 + out) of a Conv1D [in, *].
  auto linear = [&](const std::string& name, int64_t col0, int64_t out, int64_t in) {
    return HfTensor{hp + name + ".weight", {out, in}, col0, out, true};
  };
  auto bias = [&](const std::string& name, int64_t col0, int64_t out) {
    return HfTensor{hp + name + ".bias", {out}, col0, out, false};
  };
  if (rest == "ln_1.weight") return same(hp + "input_layernorm.weight");
  if (rest == "ln_2.weight") return same(hp + "post_attention_layernorm.weight");
  if (rest == "attn.q_norm.weight") return same(hp + "self_attn.q_norm.weight");
  if (rest == "attn.k_norm.weight") return same(hp + "self_attn.k_norm.weight");
  if (rest == "attn.c_attn.weight")
    return {linear("self_attn.q_proj", 0, q, C), linear("self_attn.k_proj", q, kv, C),
            linear("self_attn.v_proj", q + kv, kv, C)};
  if (rest == "attn.c_attn.bias")
    return {bias("self_attn.q_proj", 0, q), bias("self_attn.k_proj", q, kv), bias("self_attn.v_proj", q + kv, kv)};
  if (rest == "attn.c_proj.weight") return {linear("self_attn.o_proj", 0, C, q)};
  if (rest == "attn.c_proj.bias") return {bias("self_attn.o_proj", 0, C)};
  if (rest == "mlp.c_fc.weight") return {linear("mlp.gate_proj", 0, I, C), linear("mlp.up_proj", I, I, C)};
  if (rest == "mlp.c_fc.bias") return {bias("mlp.gate_proj", 0, I), bias("mlp.up_proj", I, I)};
  if (rest == "mlp.c_proj.weight") return {linear("mlp.down_proj", 0, C, I)};
  if (rest == "mlp.c_proj.bias") return {bias("mlp.down_proj", 0, C)};
  return same(s.name);  // head-kind values (static, linear, ...) keep headwise's names
}

std::vector<HfModule> llama_lora_modules(int l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  return {{p + "self_attn.q_proj", int(LoraTarget::Q), "q_proj"}, {p + "self_attn.k_proj", int(LoraTarget::K), "k_proj"},
          {p + "self_attn.v_proj", int(LoraTarget::V), "v_proj"}, {p + "self_attn.o_proj", int(LoraTarget::O), "o_proj"},
          {p + "mlp.gate_proj", -1, "gate_proj"},                 {p + "mlp.up_proj", -1, "up_proj"},
          {p + "mlp.down_proj", -1, "down_proj"}};
}

}  // namespace hw

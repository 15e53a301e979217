// Hugging Face classes of the model families (hf_family.hpp): config.json keys and tensor names.
#include "headwise/model/hf_family.hpp"

#include <filesystem>
#include <optional>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "headwise/model/remote_code.hpp"

namespace hw {

namespace {

const char* class_of(const std::string& family) {
  if (family == "llama") return "LlamaForCausalLM";
  if (family == "qwen2") return "Qwen2ForCausalLM";
  if (family == "qwen3") return "Qwen3ForCausalLM";
  return "GPT2LMHeadModel";
}

std::string yes(bool b) { return b ? "true" : "false"; }

}  // namespace

void validate_family(const ModelConfig& c) {
  const std::string who = "model.family " + c.family + " (" + class_of(c.family) + ")";
  auto need = [&](bool ok, const std::string& what) { check(ok, who + " " + what); };
  if (c.family == "gpt2") {
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
    return;
  }
  need(c.rmsnorm(), "needs model.norm = \"rmsnorm\", got \"" + c.norm + "\"");
  need(c.swiglu(), "needs model.mlp = \"swiglu\", got \"" + c.mlp + "\"");
  need(c.rope(), "needs model.pos = \"rope\", got \"" + c.pos + "\"");
  if (c.family == "qwen3")
    need(c.qk_norm, "normalises q and k (model.qk_norm must be true)");
  else
    need(!c.qk_norm, "has no q/k norm (model.qk_norm must be false; family qwen3 has it)");
  if (c.family == "qwen2") {
    need(c.has_qkv_bias(), "has q/k/v biases (model.qkv_bias must be true)");
    need(!c.has_out_bias(), "has no attention output bias (model.out_bias must be false)");
    need(!c.has_mlp_bias(), "has no MLP biases (model.mlp_bias must be false)");
    return;
  }
  // attention_bias covers q, k, v and o together.
  need(c.has_qkv_bias() == c.has_out_bias(), "has one attention_bias for q, k, v and o (model.qkv_bias " +
                                                 yes(c.has_qkv_bias()) + " and model.out_bias " +
                                                 yes(c.has_out_bias()) + " must agree)");
  if (c.family == "qwen3") need(!c.has_mlp_bias(), "has no MLP biases (model.mlp_bias must be false)");
}

void set_hf_model_type(nlohmann::json& j, const ModelConfig& c) {
  if (c.head_plan.all_softmax()) {
    j["model_type"] = c.family;
    j["architectures"] = {class_of(c.family)};
    return;
  }
  j["model_type"] = "headwise";
  j["architectures"] = {"HeadwiseForCausalLM"};
  j["headwise_family"] = c.family;
  j["auto_map"] = remote_code_auto_map();  // the Python files beside it (remote_code.hpp)
}

nlohmann::json family_hf_config(const nlohmann::json& j, const std::string& path) {
  const std::string who = path + ": model_type \"headwise\" needs headwise_family gpt2, llama, qwen2 or qwen3";
  check(j.contains("headwise_family"), who);
  const nlohmann::json& f = j["headwise_family"];
  if (f == "gpt2" || f == "llama" || f == "qwen2" || f == "qwen3") {
    nlohmann::json out = j;
    out["model_type"] = f;
    out.erase("headwise_family");
    return out;
  }
  std::string got = who + ", got ";
  if (f.is_string()) got.append("'").append(text_brief(f.get<std::string>())).append("'");
  else got.append(json_brief(f));
  fail(got);
}

nlohmann::json llama_family_hf_config(const ModelConfig& c) {
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
  if (c.family == "llama") {
    j["attention_bias"] = c.has_qkv_bias();
    j["mlp_bias"] = c.has_mlp_bias();
  } else if (c.family == "qwen3") {
    j["attention_bias"] = c.has_qkv_bias();
  }
  if (c.family != "llama") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layer;
  }
  if (c.lora.enabled()) j["headwise_lora"] = c.lora.to_json();
  set_hf_model_type(j, c);
  return j;
}

ModelConfig llama_family_from_hf_config(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json& type = j["model_type"];
  const std::string t = type.is_string() ? type.get<std::string>() : json_brief(type);
  check(t == "llama" || t == "qwen2" || t == "qwen3",
        path + ": model_type \"" + t + "\" is not supported (gpt2, llama, qwen2, qwen3 and headwise are)");
  ModelConfig c = ModelConfig::for_family(t);
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
  if (t == "llama") {
    const bool ab = opt_bool("attention_bias", false);
    c.qkv_bias = c.out_bias = ab;
    c.mlp_bias = opt_bool("mlp_bias", false);
  } else if (t == "qwen3") {
    const bool ab = opt_bool("attention_bias", false);
    c.qkv_bias = c.out_bias = ab;
  }
  if (t != "llama")
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

std::vector<int32_t> eos_token_ids(const std::string& dir, int64_t vocab) {
  const std::string path = dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  check(std::filesystem::file_size(path, ec) <= (1u << 20), path + ": too large for a generation config");
  const nlohmann::json j = parse_json(io::read_file(path), path);
  check(j.is_object(), path + ": not a JSON object");
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return {};
  const nlohmann::json& e = j["eos_token_id"];
  std::vector<int32_t> ids;
  for (const auto& v : e.is_array() ? e : nlohmann::json::array({e})) {
    const std::optional<int64_t> id = json_integer(v);
    check(id && *id >= 0 && *id < vocab,
          path + ": eos_token_id " + (id ? std::to_string(*id) : json_brief(v)) + " is not a token id of the vocabulary of " +
              std::to_string(vocab));
    ids.push_back(int32_t(*id));
  }
  return ids;
}

std::vector<HfTensor> hf_tensors(const ModelConfig& c, const ParamSpec& s) {
  const auto& shp = s.stored_shape;
  const int64_t cols = shp.empty() ? 1 : shp.back();
  if (c.family == "gpt2") return {{s.name, shp, 0, cols, false}};
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

namespace {
// Row-major [rows, cols] view of a stored tensor (1-D: one row).
void rows_cols(const ParamSpec& s, int64_t& rows, int64_t& cols) {
  cols = s.stored_shape.empty() ? 1 : s.stored_shape.back();
  rows = 1;
  for (size_t i = 0; i + 1 < s.stored_shape.size(); ++i) rows *= s.stored_shape[i];
}
}  // namespace

void hf_split(const ParamSpec& s, const HfTensor& t, const float* stored, float* out) {
  int64_t rows = 0, cols = 0;
  rows_cols(s, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < t.width; ++c) {
      const float v = stored[r * cols + t.col0 + c];
      if (t.transpose)
        out[c * rows + r] = v;
      else
        out[r * t.width + c] = v;
    }
}

void hf_join(const ParamSpec& s, const HfTensor& t, const float* in, float* stored) {
  int64_t rows = 0, cols = 0;
  rows_cols(s, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < t.width; ++c)
      stored[r * cols + t.col0 + c] = t.transpose ? in[c * rows + r] : in[r * t.width + c];
}

}  // namespace hw

// PEFT's adapter_config.json (peft_config.hpp): PEFT's own matching of modules and patterns,
// applied to the modules of the family's model, and the one LoRA configuration headwise holds.
#include "headwise/model/peft_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/safetensors.hpp"
#include "model/family/family.hpp"

namespace hw {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Python's re patterns, as ECMAScript (the subset adapter configs use); a bad one is one error.
std::regex compile(const std::string& pattern, const std::string& where) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    fail(where + ": '" + text_brief(pattern) + "' is not a regular expression headwise can read");
  }
}

class Reader {
 public:
  Reader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  // key absent or null -> false
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  std::string where(const char* key) const { return path_ + ": " + key; }

  // PEFT's list semantics (an exact name or a ".name" suffix) or a regex matched in full.
  bool matches(const char* key, const std::string& module) const {
    if (!has(key)) return false;
    const auto& v = j_[key];
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == "all-linear") return true;
      return std::regex_match(module, compile(s, where(key)));
    }
    check(v.is_array(), where(key) + " must be a list of module names or a regular expression, got " + json_brief(v));
    for (const auto& t : v) {
      const std::string name = json_string(t, where(key) + " entry");
      if (module == name || ends_with(module, "." + name)) return true;
    }
    return false;
  }

  // rank_pattern / alpha_pattern: the first pattern p with module ~ (.*\.)?(p)$ (PEFT's get_pattern_key).
  double pattern(const char* key, const std::string& module, double dflt) const {
    if (!has(key)) return dflt;
    const auto& v = j_[key];
    check(v.is_object(), where(key) + " must be an object of patterns, got " + json_brief(v));
    for (auto it = v.begin(); it != v.end(); ++it)
      if (std::regex_match(module, compile("(.*\\.)?(" + it.key() + ")", where(key))))
        return json_number(it.value(), where(key) + "." + text_brief(it.key()));
    return dflt;
  }

  // Keys whose features headwise has no equivalent for: absent, null, false, empty or the default.
  void refuse(const char* key, const char* why) const {
    if (!has(key)) return;
    const auto& v = j_[key];
    const bool off = (v.is_boolean() && !v.get<bool>()) || ((v.is_array() || v.is_object()) && v.empty()) ||
                     (v.is_string() && (v == "none" || v.get<std::string>().empty()));
    check(off, path_ + ": " + key + " = " + json_brief(v) + ": " + why);
  }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

// The layer index of a module name: its first numbered segment (PEFT's layers_to_transform rule).
bool layer_selected(const Reader& r, const nlohmann::json& j, int l) {
  if (!r.has("layers_to_transform")) return true;
  const auto& v = j["layers_to_transform"];
  if (v.is_array()) {
    if (v.empty()) return true;
    for (const auto& x : v)
      if (json_int(x, r.where("layers_to_transform") + " entry", 0, INT32_MAX) == l) return true;
    return false;
  }
  return json_int(v, r.where("layers_to_transform"), 0, INT32_MAX) == l;
}

}  // namespace

PeftAdapters read_peft_adapters(const std::string& dir, const ModelConfig& model) {
  PeftAdapters out;
  out.path = dir + "/adapter_config.json";
  const nlohmann::json j = read_json(out.path, out.path, {}, int64_t(1) << 20);
  check(j.is_object(), out.path + ": not a JSON object");
  const Reader r(j, out.path);
  const std::string peft_type = r.has("peft_type") ? json_string(j["peft_type"], r.where("peft_type")) : "LORA";
  check(peft_type == "LORA", out.path + ": peft_type \"" + text_brief(peft_type) +
                                 "\": headwise applies LoRA adapters only");
  r.refuse("use_dora", "DoRA adapters (a learned magnitude per output) are not supported");
  r.refuse("bias", "adapters that train biases are not supported (bias must be \"none\")");
  r.refuse("lora_bias", "a bias in lora_B is not supported");
  r.refuse("modules_to_save", "fully trained modules beside the adapters are not supported");
  r.refuse("layer_replication", "replicated layers are not supported");
  r.refuse("target_parameters", "adapters on parameters (not modules) are not supported");
  r.refuse("trainable_token_indices", "trainable token embeddings are not supported");
  r.refuse("use_qalora", "QALoRA is not supported");
  check(r.has("target_modules"), out.path + ": target_modules is missing");
  if (r.has("fan_in_fan_out")) json_bool(j["fan_in_fan_out"], r.where("fan_in_fan_out"));
  const bool rslora = r.has("use_rslora") && json_bool(j["use_rslora"], r.where("use_rslora"));
  const double r0 = double(json_int(json_at(j, "r", out.path), r.where("r"), 1, 1 << 20));
  const double alpha0 = r.has("lora_alpha") ? json_number(j["lora_alpha"], r.where("lora_alpha")) : 8.0;
  // A module PEFT would adapt but the file has no tensor for stays at PEFT's initial B = 0: no
  // effect, so it is left out (and such a match of another projection is no error: headwise's
  // GPT-2 adapters of before named "c_proj", which also matches mlp.c_proj).
  const ModelFamily& family = family_named(model.family);
  std::vector<std::string> names;
  const std::string weights = dir + "/adapter_model.safetensors";
  if (std::filesystem::exists(weights)) names = io::SafetensorsReader(weights).names();
  auto has_tensors = [&](const std::string& module) {
    const std::string p = "base_model.model." + module + ".lora_";
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(p, 0) == 0; });
  };
  for (int l = 0; l < model.n_layer; ++l) {
    if (!layer_selected(r, j, l)) continue;
    for (const HfModule& c : family.lora_modules(l)) {
      if (!r.matches("target_modules", c.name) || r.matches("exclude_modules", c.name)) continue;
      if (!names.empty() && !has_tensors(c.name)) continue;
      check(c.target >= 0, out.path + ": target_modules adapts " + c.name +
                               ": headwise adapts the attention projections only (q, k, v, o)");
      PeftModule m;
      m.layer = l;
      m.module = c.name;
      m.target = LoraTarget(c.target);
      const double rank = r.pattern("rank_pattern", c.name, r0), alpha = r.pattern("alpha_pattern", c.name, alpha0);
      check(rank >= 1 && rank <= (1 << 20) && rank == std::floor(rank),
            out.path + ": the rank of " + c.name + " must be a positive integer");
      check(std::isfinite(alpha) && alpha > 0, out.path + ": lora_alpha of " + c.name + " must be positive");
      m.rank = int(rank);
      m.scaling = alpha / (rslora ? std::sqrt(rank) : rank);
      out.modules.push_back(m);
    }
  }
  check(!out.modules.empty(), out.path + ": target_modules matches no attention projection of this model");
  // The model's LoRA: every layer and target that has a module (absent combinations hold zeros).
  LoraConfig& lc = out.lora;
  const LoraConfig& declared = model.lora;
  lc.freeze_base = declared.enabled() && declared.freeze_base;
  lc.dropout = r.has("lora_dropout") ? json_number(j["lora_dropout"], r.where("lora_dropout")) : 0.0;
  lc.targets = {false, false, false, false};
  std::vector<int> layers;
  int c_attn_rank = 0;
  for (const PeftModule& m : out.modules) {
    if (std::find(layers.begin(), layers.end(), m.layer) == layers.end()) layers.push_back(m.layer);
    lc.rank = std::max(lc.rank, m.rank);
    if (family.fused_qkv && m.target == LoraTarget::Q) c_attn_rank = std::max(c_attn_rank, m.rank);
    lc.targets[size_t(m.target)] = true;
  }
  if (int(layers.size()) < model.n_layer) lc.layers = layers;
  if (family.fused_qkv && lc.targets[size_t(LoraTarget::Q)]) {
    // the fused q|k|v module (GPT-2's c_attn): headwise's packed form when config.json's own LoRA
    // says so, else q, k and v each.
    int m = 0;
    for (int t = 0; t < 3; ++t) m += declared.enabled() && declared.has(LoraTarget(t));
    bool o_rank = true;  // headwise writes the output projection at the adapters' rank
    for (const PeftModule& pm : out.modules) o_rank = o_rank && (pm.target != LoraTarget::O || pm.rank == declared.rank);
    out.packed_c_attn = m > 0 && o_rank && c_attn_rank == m * declared.rank;
    for (int t = 0; t < 3; ++t) lc.targets[size_t(t)] = out.packed_c_attn ? declared.has(LoraTarget(t)) : true;
    if (out.packed_c_attn) lc.rank = declared.rank;
  }
  // One scaling for the model: the first module's (the others fold theirs into B).
  lc.alpha = out.modules.front().scaling * lc.rank;
  return out;
}

}  // namespace hw

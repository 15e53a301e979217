#include "headwise/model/lora_config.hpp"

#include <algorithm>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/model/model_config.hpp"

namespace hw {

const char* lora_target_name(LoraTarget t) {
  static const char* names[kLoraTargets] = {"q", "k", "v", "o"};
  return names[int(t)];
}

bool LoraConfig::on_layer(int l) const {
  return enabled() && (layers.empty() || std::find(layers.begin(), layers.end(), l) != layers.end());
}

void LoraConfig::validate(const ModelConfig& m) const {
  check(rank >= 0, "model.lora.rank must be >= 0 (0 = no adapters), got " + std::to_string(rank));
  if (!enabled()) {
    check(!freeze_base, "model.lora.freeze_base needs adapters (model.lora.rank > 0)");
    return;
  }
  check(alpha > 0, "model.lora.alpha must be positive, got " + std::to_string(alpha));
  check(dropout >= 0 && dropout < 1, "model.lora.dropout must be in [0, 1), got " + std::to_string(dropout));
  check(std::any_of(targets.begin(), targets.end(), [](bool b) { return b; }),
        "model.lora.targets must name at least one of q, k, v, o");
  for (int l : layers)
    check(l >= 0 && l < m.n_layer, "model.lora.layers: layer " + std::to_string(l) + " is outside the model's " +
                                       std::to_string(m.n_layer) + " layers");
  std::vector<int> sorted = layers;
  std::sort(sorted.begin(), sorted.end());
  check(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "model.lora.layers names a layer twice");
  // A rank-r update of an in x out projection is full rank at r = min(in, out); beyond that the
  // extra rank only adds parameters.
  const int hd = m.head_dim();
  const int widths[kLoraTargets] = {m.n_head * hd, m.kv_heads() * hd, m.kv_heads() * hd, m.n_head * hd};
  for (int t = 0; t < kLoraTargets; ++t) {
    if (!targets[size_t(t)]) continue;
    const int limit = std::min(m.n_embd, widths[t]);
    check(rank <= limit, "model.lora.rank " + std::to_string(rank) + " exceeds the " +
                             lora_target_name(LoraTarget(t)) + " projection's smaller dimension " +
                             std::to_string(limit));
  }
}

LoraConfig LoraConfig::from_json(const nlohmann::json& section) {
  check(section.is_object(), "model.lora must be a JSON object");
  LoraConfig c;
  JsonFields f(section, "model.lora");
  f.get("rank", c.rank);
  f.get("alpha", c.alpha);
  f.get("dropout", c.dropout);
  f.get("freeze_base", c.freeze_base);
  if (const auto* ls = f.raw("layers")) {
    check(ls->is_array(), "model.lora.layers must be an array of layer indices");
    for (const auto& l : *ls) {
      c.layers.push_back(int(json_int(l, "model.lora.layers: entry", 0, INT32_MAX)));
    }
  }
  if (const auto* ts = f.raw("targets")) {
    check(ts->is_array(), "model.lora.targets must be an array of \"q\", \"k\", \"v\", \"o\"");
    c.targets = {false, false, false, false};
    for (const auto& t : *ts) {
      bool known = false;
      for (int i = 0; i < kLoraTargets; ++i)
        if (t.is_string() && t.get<std::string>() == lora_target_name(LoraTarget(i))) {
          check(!c.targets[size_t(i)], "model.lora.targets names \"" + t.get<std::string>() + "\" twice");
          c.targets[size_t(i)] = known = true;
        }
      if (!known) {  // (built piece by piece: GCC 12 warns -Wrestrict, falsely, on one chained +)
        std::string what = t.is_string() ? text_brief(t.get<std::string>()) : json_brief(t);
        if (t.is_string()) what = "\"" + what + "\"";
        fail("model.lora.targets: unknown target " + what + " (known: q, k, v, o)");
      }
    }
  }
  f.finish();
  return c;
}

nlohmann::json LoraConfig::to_json() const {
  nlohmann::json ts = nlohmann::json::array();
  for (int i = 0; i < kLoraTargets; ++i)
    if (targets[size_t(i)]) ts.push_back(lora_target_name(LoraTarget(i)));
  return {{"rank", rank},   {"alpha", alpha},     {"dropout", dropout},
          {"layers", layers}, {"targets", ts},    {"freeze_base", freeze_base}};
}

}  // namespace hw

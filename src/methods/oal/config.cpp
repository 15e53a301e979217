#include "headwise/methods/oal/config.hpp"

#include <algorithm>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::oal {

namespace {

int parse_int(const std::string& text, const std::string& key) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(!text.empty() && used == text.size(), key + ": \"" + text + "\" is not an integer");
  return v;
}

}  // namespace

std::vector<int> parse_layers(const nlohmann::json& spec, int n_layer, const std::string& key) {
  std::vector<int> out;
  if (spec.is_array()) {
    for (const auto& e : spec) {
      out.push_back(int(json_int(e, key + ": list entry", INT32_MIN, INT32_MAX)));
    }
  } else if (spec.is_number_integer()) {
    out.push_back(int(json_int(spec, key, INT32_MIN, INT32_MAX)));
  } else {
    check(spec.is_string(), key + " must be a string (\"3-20\", \"1,4\") or a list of integers");
    const std::string s = spec.get<std::string>();
    if (s.empty())
      for (int l = 0; l < n_layer; ++l) out.push_back(l);
    std::stringstream ss(s);
    std::string part;
    while (!s.empty() && std::getline(ss, part, ',')) {
      const size_t dash = part.find('-', 1);
      if (dash == std::string::npos) {
        out.push_back(parse_int(part, key));
      } else {
        const int a = parse_int(part.substr(0, dash), key), b = parse_int(part.substr(dash + 1), key);
        check(a <= b, key + ": range \"" + part + "\" runs backwards");
        for (int l = a; l <= b; ++l) out.push_back(l);
      }
    }
  }
  for (int l : out)
    check(l >= 0 && l < n_layer, key + ": layer " + std::to_string(l) + " is outside the model's layers 0.." +
                                     std::to_string(n_layer - 1));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  check(!out.empty(), key + " names no layer");
  return out;
}

OalConfig OalConfig::from_json(const nlohmann::json& spec, const std::string& where) {
  OalConfig m;
  m.where = where;
  JsonFields f(spec, where);
  std::string name;
  f.get("name", name);
  check(name == "oal", where + ".name is \"" + name + "\", not \"oal\"");
  if (const nlohmann::json* l = f.raw("layers")) m.layers_spec = *l;
  f.get("kernel", m.kernel);
  f.get("performer_features", m.performer_features);
  f.get("grouping", m.grouping);
  f.get("tail_fraction", m.group.tail_fraction);
  f.get("ratio_threshold", m.group.ratio_threshold);
  f.get("support", m.group.support);
  f.get("bootstrap", m.group.bootstrap);
  f.get("min_groups", m.group.min_groups);
  f.get("max_groups", m.group.max_groups);
  f.get("stats_prompts", m.stats_prompts);
  f.get("stats_seq_len", m.stats_seq_len);
  f.get("fit_seqs", m.fit_seqs);
  f.get("val_seqs", m.val_seqs);
  f.get("calib_seq_len", m.calib_seq_len);
  f.get("lr", m.calib.lr);
  f.get("max_updates", m.calib.max_updates);
  f.get("positions", m.calib.positions);
  f.get("val_every", m.calib.val_every);
  f.get("patience", m.calib.patience);
  f.get("grad_clip", m.calib.grad_clip);
  f.get("perturb_std", m.calib.perturb_std);
  f.get("lora_rank", m.lora_rank);
  f.get("lora_alpha", m.lora_alpha);
  f.get("lora_dropout", m.lora_dropout);
  f.get("lora_freeze_base", m.lora_freeze_base);
  f.get("seed", m.seed);
  f.get("at_step", m.at_step);
  f.finish("method \"oal\"");
  const std::string w = where + ".";
  parse_grouping(m.grouping, 1 << 30, w + "grouping");  // G against head_dim in check_run
  m.kernel_kind();
  check(m.performer_features >= 1 && m.performer_features <= attn::HeadSpec::kMaxPerformerFeatures,
        w + "performer_features must be in 1.." + std::to_string(attn::HeadSpec::kMaxPerformerFeatures));
  check(m.group.tail_fraction > 0 && m.group.tail_fraction <= 1, w + "tail_fraction must be in (0, 1]");
  check(m.group.ratio_threshold >= 1, w + "ratio_threshold must be >= 1");
  check(m.group.support >= 0 && m.group.support <= 1, w + "support must be in [0, 1]");
  check(m.group.bootstrap >= 1, w + "bootstrap must be >= 1");
  check(m.group.min_groups >= 1 && m.group.max_groups >= m.group.min_groups,
        w + "min_groups must be >= 1 and max_groups >= min_groups");
  check(m.stats_prompts >= 1, w + "stats_prompts must be >= 1");
  check(m.stats_seq_len >= 0 && m.calib_seq_len >= 0, w + "stats_seq_len and " + w + "calib_seq_len must be >= 0");
  check(m.fit_seqs >= 1 && m.val_seqs >= 1, w + "fit_seqs and " + w + "val_seqs must be >= 1");
  check(m.calib.lr > 0, w + "lr must be positive");
  check(m.calib.max_updates >= 0, w + "max_updates must be >= 0");
  check(m.calib.positions >= 1, w + "positions must be >= 1");
  check(m.calib.val_every >= 1 && m.calib.patience >= 1, w + "val_every and " + w + "patience must be >= 1");
  check(m.calib.grad_clip >= 0 && m.calib.perturb_std >= 0, w + "grad_clip and " + w + "perturb_std must be >= 0");
  check(m.lora_rank >= 0, w + "lora_rank must be >= 0 (0: no adapters)");
  check(m.lora_alpha > 0, w + "lora_alpha must be positive");
  check(m.lora_dropout >= 0 && m.lora_dropout < 1, w + "lora_dropout must be in [0, 1)");
  check(m.seed >= 0, w + "seed must be >= 0");
  check(m.at_step >= 0, w + "at_step must be >= 0");
  return m;
}

nlohmann::json OalConfig::to_json() const {
  return {{"name", "oal"},
          {"layers", layers_spec},
          {"kernel", kernel},
          {"performer_features", performer_features},
          {"grouping", grouping},
          {"tail_fraction", group.tail_fraction},
          {"ratio_threshold", group.ratio_threshold},
          {"support", group.support},
          {"bootstrap", group.bootstrap},
          {"min_groups", group.min_groups},
          {"max_groups", group.max_groups},
          {"stats_prompts", stats_prompts},
          {"stats_seq_len", stats_seq_len},
          {"fit_seqs", fit_seqs},
          {"val_seqs", val_seqs},
          {"calib_seq_len", calib_seq_len},
          {"lr", calib.lr},
          {"max_updates", calib.max_updates},
          {"positions", calib.positions},
          {"val_every", calib.val_every},
          {"patience", calib.patience},
          {"grad_clip", calib.grad_clip},
          {"perturb_std", calib.perturb_std},
          {"lora_rank", lora_rank},
          {"lora_alpha", lora_alpha},
          {"lora_dropout", lora_dropout},
          {"lora_freeze_base", lora_freeze_base},
          {"seed", seed},
          {"at_step", at_step}};
}

std::vector<int> OalConfig::layers(int n_layer) const { return parse_layers(layers_spec, n_layer, where + ".layers"); }

GroupingSpec OalConfig::grouping_spec(int head_dim) const { return parse_grouping(grouping, head_dim, where + ".grouping"); }

KernelKind OalConfig::kernel_kind() const { return parse_kernel(kernel, where + ".kernel"); }

uint64_t OalConfig::stream_seed(const RunConfig& run) const {
  return seed != 0 ? uint64_t(seed) : uint64_t(run.train.seed) + 1;
}

int64_t OalConfig::calib_length(const RunConfig& run) const {
  return calib_seq_len > 0 ? calib_seq_len : run.train.seq_len;
}

int64_t OalConfig::stats_length(const RunConfig& run) const {
  return stats_seq_len > 0 ? stats_seq_len : calib_length(run);
}

LoraConfig OalConfig::adapters() const {
  LoraConfig l;
  l.rank = int(lora_rank);
  l.alpha = lora_alpha;
  l.dropout = lora_dropout;
  l.freeze_base = lora_freeze_base;
  return l;
}

void OalConfig::check_run(const RunConfig& run) const {
  layers(run.model.n_layer);
  grouping_spec(run.model.head_dim());
  const std::string w = where + ".";
  check(at_step <= run.train.steps, w + "at_step: OAL would act at update " + std::to_string(at_step) +
                                        ", beyond the run's train.steps = " + std::to_string(run.train.steps));
  check(calib_length(run) <= run.model.block_size && stats_length(run) <= run.model.block_size,
        w + "calib_seq_len / " + w + "stats_seq_len exceed model.block_size (" + std::to_string(run.model.block_size) +
            ")");
  if (lora_rank > 0) adapters().validate(run.model);
}

}  // namespace hw::oal

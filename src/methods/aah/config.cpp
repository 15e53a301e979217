#include "headwise/methods/aah/config.hpp"

#include <cmath>

#include "headwise/attention/head_plan.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::aah {

namespace {

struct RegimeName {
  Regime regime;
  const char* name;
};
constexpr RegimeName kRegimes[] = {{Regime::Full, "full"},
                                   {Regime::GroupingOff, "grouping_off"},
                                   {Regime::FullAdaptive, "full_adaptive"},
                                   {Regime::ShallowFreeze, "shallow_freeze"},
                                   {Regime::DeepReuse, "deep_reuse"}};

struct AblationName {
  Ablation ablation;
  const char* name;
  bool takes_value;
};
constexpr AblationName kAblations[] = {{Ablation::None, "none", false},
                                       {Ablation::ControlOff, "control_off", false},
                                       {Ablation::FixedRandomGrouping, "fixed_random_grouping", false},
                                       {Ablation::FreezeAfterWarmup, "freeze_after_warmup", false},
                                       {Ablation::IndependentScoring, "independent_scoring", false},
                                       {Ablation::NoParentConstraint, "no_parent_constraint", false},
                                       {Ablation::NoFeatureEma, "no_feature_ema", false},
                                       {Ablation::FixedWindow, "fixed_window", true},
                                       {Ablation::ShufflePostSelect, "shuffle_post_select", false},
                                       {Ablation::RandomUniform, "random_uniform", false},
                                       {Ablation::ControlInterval, "control_interval", true}};

std::string regime_list() {
  std::string s;
  for (const auto& r : kRegimes) s += std::string(s.empty() ? "" : ", ") + r.name;
  return s;
}

std::string ablation_list() {
  std::string s;
  for (const auto& a : kAblations) s += std::string(s.empty() ? "" : ", ") + a.name + (a.takes_value ? ":N" : "");
  return s;
}

// "name" or "name:N" (N a positive integer) into (ablation, N); errors name the key.
void parse_ablation(const std::string& text, const std::string& key, Ablation& out, int64_t& value) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  for (const auto& a : kAblations) {
    if (name != a.name) continue;
    if (!a.takes_value) {
      check(colon == std::string::npos, key + ": '" + text + "': " + a.name + " takes no value");
      out = a.ablation;
      value = 0;
      return;
    }
    check(colon != std::string::npos, key + ": '" + text + "': expected " + a.name + ":N");
    const std::string num = text.substr(colon + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(!num.empty() && used == num.size() && v >= 1,
          key + ": '" + text + "': " + a.name + " needs a positive integer, got '" + num + "'");
    out = a.ablation;
    value = v;
    return;
  }
  fail(key + ": unknown ablation '" + text + "' (one of: " + ablation_list() + ")");
}

// A window W as a head of the one validity function, and within the context T.
void check_window(int64_t w, int64_t T, const std::string& key) {
  attn::HeadSpec spec;
  spec.kind = attn::HeadKind::Window;
  spec.window = int32_t(std::max<int64_t>(std::min<int64_t>(w, INT32_MAX), INT32_MIN));
  const std::string why = w == int64_t(spec.window) ? spec.invalid_reason() : "does not fit in 32 bits";
  check(why.empty(), key + ": window " + std::to_string(w) + ": " + why);
  check(w <= T, key + ": window " + std::to_string(w) + " exceeds the context T = model.block_size = " +
                    std::to_string(T) + " (windows must be in 1..T)");
}

}  // namespace

const char* regime_name(Regime r) {
  for (const auto& x : kRegimes)
    if (x.regime == r) return x.name;
  return "?";
}

std::string ablation_text(Ablation a, int64_t value) {
  for (const auto& x : kAblations)
    if (x.ablation == a) return x.takes_value ? std::string(x.name) + ":" + std::to_string(value) : x.name;
  return "?";
}

AahConfig AahConfig::from_json(const nlohmann::json& spec, const std::string& where) {
  AahConfig m;
  m.where = where;
  const std::string w = where + ".";
  JsonFields f(spec, where);
  std::string name, regime = "full_adaptive", ablation = "none";
  f.get("name", name);
  check(name == "aah", where + ".name is \"" + name + "\", not \"aah\"");
  f.get("regime", regime);
  if (const nlohmann::json* ws = f.raw("windows")) {
    check(ws->is_array() && !ws->empty(), w + "windows: expected a non-empty list of integers");
    for (const auto& x : *ws) {
      check(x.is_number_integer(), w + "windows: expected integers, got " + json_brief(x));
      m.windows.push_back(json_int(x, w + "windows: entry"));
    }
  }
  f.get("warmup_steps", m.warmup_steps);
  f.get("control_every", m.control_every);
  f.get("feature_ema", m.feature_ema);
  f.get("resolution_ema", m.resolution_ema);
  const bool depth_given = spec.is_object() && spec.contains("max_depth");
  f.get("max_depth", m.max_depth);
  f.get("similarity", m.similarity);
  f.get("upper_similarity", m.upper_similarity);
  f.get("seed", m.seed);
  f.get("ablation", ablation);
  f.finish("method \"aah\"");

  bool known = false;
  for (const auto& r : kRegimes)
    if (regime == r.name) m.regime = r.regime, known = true;
  check(known, w + "regime: unknown regime '" + regime + "' (one of: " + regime_list() + ")");
  parse_ablation(ablation, w + "ablation", m.ablation, m.ablation_value);
  if (!depth_given && m.regime == Regime::ShallowFreeze) m.max_depth = 1;

  for (size_t i = 0; i < m.windows.size(); ++i) {
    check(m.windows[i] >= 1, w + "windows: window " + std::to_string(m.windows[i]) + " is not in 1..T");
    if (i > 0)
      check(m.windows[i] > m.windows[i - 1], w + "windows must be strictly ascending, got " +
                                                 std::to_string(m.windows[i - 1]) + " before " +
                                                 std::to_string(m.windows[i]));
  }
  check(m.warmup_steps >= 0, w + "warmup_steps must be >= 0, got " + std::to_string(m.warmup_steps));
  check(m.control_every >= 1, w + "control_every must be >= 1, got " + std::to_string(m.control_every));
  check(m.feature_ema >= 0 && m.feature_ema < 1,
        w + "feature_ema must be in [0, 1), got " + nlohmann::json(m.feature_ema).dump());
  check(m.resolution_ema >= 0 && m.resolution_ema < 1,
        w + "resolution_ema must be in [0, 1), got " + nlohmann::json(m.resolution_ema).dump());
  check(m.max_depth >= 1 && m.max_depth <= 16, w + "max_depth must be in 1..16, got " + std::to_string(m.max_depth));
  check(std::isfinite(m.similarity) && m.similarity >= -1 && m.similarity <= 1,
        w + "similarity must be in [-1, 1], got " + nlohmann::json(m.similarity).dump());
  check(std::isfinite(m.upper_similarity) && m.upper_similarity <= 1,
        w + "upper_similarity must be a number <= 1, got " + nlohmann::json(m.upper_similarity).dump());
  check(m.seed >= 0, w + "seed must be >= 0, got " + std::to_string(m.seed));
  return m;
}

nlohmann::json AahConfig::to_json() const {
  return {{"name", "aah"},
          {"regime", regime_name(regime)},
          {"windows", windows},
          {"warmup_steps", warmup_steps},
          {"control_every", control_every},
          {"feature_ema", feature_ema},
          {"resolution_ema", resolution_ema},
          {"max_depth", max_depth},
          {"similarity", similarity},
          {"upper_similarity", upper_similarity},
          {"seed", seed},
          {"ablation", ablation_text(ablation, ablation_value)}};
}

void AahConfig::check_run(const RunConfig& run) {
  const int64_t T = run.model.block_size;
  if (windows.empty()) {
    for (int64_t d : {8, 4, 2, 1}) windows.push_back(std::max<int64_t>(1, T / d));
    for (size_t i = 1; i < windows.size(); ++i)
      check(windows[i] > windows[i - 1], where + ".windows: the default {T/8, T/4, T/2, T} is not ascending for T = " +
                                             std::to_string(T) + "; give the windows");
  }
  for (int64_t w : windows) check_window(w, T, where + ".windows");
  if (ablation == Ablation::FixedWindow) check_window(ablation_value, T, where + ".ablation");
}

}  // namespace hw::aah

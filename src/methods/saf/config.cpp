#include "headwise/methods/saf/config.hpp"

#include <cmath>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/methods/saf/calibration.hpp"
#include "headwise/methods/saf/patterns.hpp"
#include "headwise/methods/saf/select.hpp"

namespace hw::saf {

SafConfig SafConfig::from_json(const nlohmann::json& spec, const std::string& where) {
  SafConfig m;
  m.where = where;
  JsonFields f(spec, where);
  std::string name;
  f.get("name", name);
  check(name == "saf", where + ".name is \"" + name + "\", not \"saf\"");
  f.get("ratio", m.ratio);
  f.get("ratio_of", m.ratio_of);
  f.get("at_fraction", m.at_fraction);
  f.get("at_step", m.at_step);
  f.get("calib_seqs", m.calib_seqs);
  f.get("calib_seq_len", m.calib_seq_len);
  f.get("selector", m.selector);
  f.get("pattern", m.pattern);
  f.get("mode", m.mode);
  f.get("fit_steps", m.fit_steps);
  f.get("fit_lr", m.fit_lr);
  f.get("max_kl", m.max_kl);
  f.get("seed", m.seed);
  f.get("memory_budget_mb", m.memory_budget_mb);
  f.get("capture", m.capture);
  f.finish("method \"saf\"");
  const std::string w = where + ".";
  check(m.ratio >= 0 && m.ratio <= 1, w + "ratio must be in [0, 1]");
  check(m.ratio_of == "all" || m.ratio_of == "remaining",
        w + "ratio_of must be all or remaining, got \"" + text_brief(m.ratio_of) + "\"");
  check(m.at_fraction >= 0 && m.at_fraction <= 1, w + "at_fraction must be in [0, 1] (1: after the last update)");
  check(m.at_step >= -1, w + "at_step must be >= 0 (or -1: at_fraction decides)");
  check(m.calib_seqs >= 2, w + "calib_seqs must be >= 2 (variance needs two samples)");
  check(m.calib_seq_len >= 0, w + "calib_seq_len must be >= 0");
  check(m.selector == "variance" || m.selector == "kl" || m.selector == "random" || m.selector == "gate_taylor",
        w + "selector must be variance, kl, random or gate_taylor, got \"" + text_brief(m.selector) + "\"");
  check(m.pattern == "mean" || m.pattern == "sharp_mean" || m.pattern == "gaussian" || m.pattern == "dirichlet" ||
            m.pattern == "structured_random",
        w + "pattern must be mean, sharp_mean, gaussian, dirichlet or structured_random, got \"" + text_brief(m.pattern) + "\"");
  check(m.mode == "freeze" || m.mode == "prune", w + "mode must be freeze or prune, got \"" + text_brief(m.mode) + "\"");
  check(m.fit_steps >= 0 && m.fit_lr > 0 && m.max_kl > 0, w + "fit_steps, fit_lr and max_kl must be positive");
  check(m.memory_budget_mb >= 0, w + "memory_budget_mb must be >= 0");
  parse_capture_path(m.capture, w + "capture");
  parse_selector(m.selector);
  parse_pattern(m.pattern);
  return m;
}

nlohmann::json SafConfig::to_json() const {
  return {{"name", "saf"},          {"ratio", ratio},       {"ratio_of", ratio_of},  {"at_fraction", at_fraction},
          {"at_step", at_step},     {"calib_seqs", calib_seqs}, {"calib_seq_len", calib_seq_len},
          {"selector", selector},   {"pattern", pattern},   {"mode", mode},
          {"fit_steps", fit_steps}, {"fit_lr", fit_lr},     {"max_kl", max_kl},
          {"seed", seed},           {"memory_budget_mb", memory_budget_mb},
          {"capture", capture}};
}

int64_t SafConfig::fire_step(const RunConfig& run) const {
  if (at_step >= 0) return at_step;
  return int64_t(std::llround(at_fraction * double(run.train.steps)));
}

void SafConfig::check_fire_step(const RunConfig& run) const {
  const int64_t s = fire_step(run);
  const std::string key = at_step >= 0 ? where + ".at_step" : where + ".at_fraction";
  check(s >= 0 && s <= run.train.steps,
        key + ": SAF would fire at update " + std::to_string(s) + ", beyond the run's train.steps = " +
            std::to_string(run.train.steps) + " (at most train.steps: after the last update)");
}

uint64_t SafConfig::stream_seed(const RunConfig& run) const {
  return seed != 0 ? uint64_t(seed) : uint64_t(run.train.seed) + 1;
}

int64_t SafConfig::calib_length(const RunConfig& run) const {
  return calib_seq_len > 0 ? calib_seq_len : run.train.seq_len;
}

}  // namespace hw::saf

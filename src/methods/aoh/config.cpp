#include "headwise/methods/aoh/config.hpp"

#include <cmath>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/json_fields.hpp"

namespace hw::aoh {

AohConfig AohConfig::from_json(const nlohmann::json& spec, const std::string& where) {
  AohConfig m;
  m.where = where;
  JsonFields f(spec, where);
  std::string name;
  f.get("name", name);
  check(name == "aoh", where + ".name is \"" + name + "\", not \"aoh\"");
  f.get("sparsity", m.sparsity);
  f.get("sink", m.sink);
  f.get("window", m.window);
  f.get("per_layer", m.per_layer);
  f.get("selection", m.selection);
  f.get("seed", m.seed);
  f.get("at_fraction", m.at_fraction);
  f.get("at_step", m.at_step);
  f.finish("method \"aoh\"");
  const std::string w = where + ".";
  check(m.sparsity >= 0 && m.sparsity <= 1,
        w + "sparsity must be in [0, 1] (the fraction of KV heads that stream), got " + nlohmann::json(m.sparsity).dump());
  check(m.selection == "spectrum" || m.selection == "random",
        w + "selection must be \"spectrum\" or \"random\", got \"" + text_brief(m.selection) + "\"");
  check(m.seed >= 0, w + "seed must be >= 0");
  check(m.sink >= 0, w + "sink must be >= 0, got " + std::to_string(m.sink));
  check(m.window >= 1, w + "window must be >= 1, got " + std::to_string(m.window));
  check(m.sink <= INT32_MAX && m.window <= INT32_MAX, w + "sink and " + w + "window must fit in 32 bits");
  check(m.at_fraction >= 0 && m.at_fraction <= 1, w + "at_fraction must be in [0, 1] (1: after the last update)");
  check(m.at_step >= -1, w + "at_step must be >= 0 (or -1: at_fraction decides)");
  return m;
}

nlohmann::json AohConfig::to_json() const {
  return {{"name", "aoh"},         {"sparsity", sparsity},       {"sink", sink},       {"window", window},
          {"per_layer", per_layer}, {"selection", selection},   {"seed", seed},
          {"at_fraction", at_fraction}, {"at_step", at_step}};
}

int64_t AohConfig::fire_step(const RunConfig& run) const {
  if (at_step >= 0) return at_step;
  return int64_t(std::llround(at_fraction * double(run.train.steps)));
}

void AohConfig::check_run(const RunConfig& run) const {
  const int64_t s = fire_step(run);
  const std::string key = at_step >= 0 ? where + ".at_step" : where + ".at_fraction";
  check(s >= 0 && s <= run.train.steps,
        key + ": AoH would act at update " + std::to_string(s) + ", beyond the run's train.steps = " +
            std::to_string(run.train.steps) + " (at most train.steps: after the last update)");
  check(sink + window <= run.model.block_size,
        where + ".sink + " + where + ".window (" + std::to_string(sink) + " + " + std::to_string(window) + " = " +
            std::to_string(sink + window) + ") exceed model.block_size (" + std::to_string(run.model.block_size) +
            "): a streaming head would see every key");
}

}  // namespace hw::aoh

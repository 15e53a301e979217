// Reading the experiment spec and building each branch's run config.
#include <algorithm>
#include <cmath>
#include <set>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/experiment/experiment.hpp"
#include "headwise/methods/method_registry.hpp"

namespace hw {

namespace {

std::string pct(double ratio) { return std::to_string(int(std::lround(ratio * 100.0))); }

std::vector<double> number_list(const nlohmann::json& j, const std::string& key) {
  check(j.is_array() && !j.empty(), "config key experiment." + key + ": expected a non-empty list of numbers");
  std::vector<double> out;
  for (const auto& v : j) {
    check(v.is_number(), "config key experiment." + key + ": expected numbers, got " + json_brief(v));
    out.push_back(v.get<double>());
  }
  return out;
}

// With `fractions` empty, one SAF branch per ratio and one per control, timed by the config's
// method section; otherwise all of them once per fraction (at_fraction set, at_step cleared),
// named with a suffix _at_<pct>.
std::vector<ExperimentBranch> generated_branches(const std::vector<double>& ratios,
                                                 const std::vector<std::string>& controls, double control_ratio,
                                                 const std::vector<double>& fractions) {
  for (const auto& c : controls)
    check(c == "prune" || c == "random" || c == "gate_taylor",
          "config key experiment.controls: unknown control '" + c + "' (expected prune, random or gate_taylor)");
  std::vector<ExperimentBranch> b;
  b.push_back({"ordinary", {{"name", "none"}}});
  const std::vector<double> timings = fractions.empty() ? std::vector<double>{-1.0} : fractions;
  for (double f : timings) {
    auto add = [&](const std::string& name, nlohmann::json method) {
      if (f < 0) {
        b.push_back({name, std::move(method)});
        return;
      }
      method["at_fraction"] = f;
      method["at_step"] = -1;  // a config's at_step would override the fraction
      b.push_back({name + "_at_" + pct(f), std::move(method)});
    };
    for (double r : ratios) add("saf_" + pct(r), {{"name", "saf"}, {"ratio", r}});
    const std::string p = pct(control_ratio);
    for (const auto& c : controls) {
      if (c == "prune")
        add("prune_" + p, {{"name", "saf"}, {"ratio", control_ratio}, {"mode", "prune"}});
      else if (c == "random")
        add("random_" + p, {{"name", "saf"}, {"ratio", control_ratio}, {"selector", "random"}});
      else
        add("gate_taylor_" + p, {{"name", "saf"}, {"ratio", control_ratio}, {"selector", "gate_taylor"}, {"mode", "prune"}});
    }
  }
  return b;
}

}  // namespace

ExperimentSpec ExperimentSpec::from_json(const nlohmann::json& j) {
  ExperimentSpec s;
  JsonFields f(j, "experiment");
  f.get("budget", s.budget);
  f.get("eval_batches", s.eval_batches);
  f.get("save_final", s.save_final);
  f.get("speed_rounds", s.speed_rounds);
  if (const auto* v = f.raw("speed_sets")) {
    check(v->is_array(), "config key experiment.speed_sets: expected a list of \"key=value\" strings");
    for (const auto& x : *v) {
      check(x.is_string() && x.get<std::string>().find('=') != std::string::npos,
            "config key experiment.speed_sets: expected \"key=value\" strings, got " + json_brief(x));
      s.speed_sets.push_back(x.get<std::string>());
    }
  }
  if (const auto* v = f.raw("seeds"))
    for (double x : number_list(*v, "seeds")) {
      check(x == std::floor(x) && x >= 0, "config key experiment.seeds: seeds must be non-negative integers");
      s.seeds.push_back(int64_t(x));
    }
  std::vector<double> ratios = {0.25, 0.5};
  if (const auto* v = f.raw("ratios")) ratios = number_list(*v, "ratios");
  std::vector<std::string> controls = {"prune", "random", "gate_taylor"};
  if (const auto* v = f.raw("controls")) {
    check(v->is_array(), "config key experiment.controls: expected a list of names");
    controls.clear();
    for (const auto& c : *v) {
      check(c.is_string(), "config key experiment.controls: expected names, got " + json_brief(c));
      controls.push_back(c.get<std::string>());
    }
  }
  double control_ratio = ratios.front();
  f.get("control_ratio", control_ratio);
  std::vector<double> fractions;
  const auto* at_fractions = f.raw("at_fractions");
  if (at_fractions) fractions = number_list(*at_fractions, "at_fractions");
  const auto* branches = f.raw("branches");
  f.finish();
  check(s.budget == "tokens" || s.budget == "time",
        "config key experiment.budget: expected \"tokens\" or \"time\", got \"" + text_brief(s.budget) + "\"");
  check(s.eval_batches >= 0, "config key experiment.eval_batches must be >= 0");
  check(s.speed_rounds >= 0, "config key experiment.speed_rounds must be >= 0 (0: no A-B-B-A speed phase)");
  for (double r : ratios) check(r > 0 && r <= 1, "config key experiment.ratios: ratios must be in (0, 1]");
  check(control_ratio > 0 && control_ratio <= 1, "config key experiment.control_ratio must be in (0, 1]");
  for (double x : fractions)
    check(x >= 0 && x <= 1, "config key experiment.at_fractions: fractions must be in [0, 1] (1: after the last update)");
  check(!(at_fractions && branches),
        "config key experiment.at_fractions: generates branches from ratios and controls; with an explicit "
        "\"branches\" list set each branch's method.at_fraction instead");
  if (branches) {
    check(branches->is_array() && !branches->empty(), "config key experiment.branches: expected a non-empty list");
    for (const auto& b : *branches) {
      check(b.is_object() && b.contains("name") && b["name"].is_string(),
            "config key experiment.branches: every branch needs a \"name\" string, got " + json_brief(b));
      for (auto it = b.begin(); it != b.end(); ++it)
        check(it.key() == "name" || it.key() == "method",
              "config key experiment.branches: unknown key '" + it.key() + "' (expected name, method)");
      ExperimentBranch br{b["name"].get<std::string>(), nlohmann::json::object()};
      if (b.contains("method")) {
        check(b["method"].is_object() || (b["method"].is_array() && !b["method"].empty()),
              "config key experiment.branches[" + br.name +
                  "].method must be an object (keys onto the config's method section) or a non-empty list (a "
                  "stack of methods, replacing it)");
        br.method = b["method"];
      }
      if (br.method.is_object() && !br.method.contains("name")) br.method["name"] = "saf";
      s.branches.push_back(std::move(br));
    }
  } else {
    s.branches = generated_branches(ratios, controls, control_ratio, fractions);
  }
  std::set<std::string> names;
  for (const auto& b : s.branches) {
    // A branch is a folder under the experiment's: one plain name, never "." or ".." (the folder
    // itself or its parent), a path, or control bytes.
    const bool plain = std::none_of(b.name.begin(), b.name.end(), [](char c) {
      return c == '/' || c == '\\' || c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    check(!b.name.empty() && b.name.size() <= 128 && plain && b.name != "." && b.name != ".." && b.name != "trunk",
          "config key experiment.branches: bad branch name '" + text_brief(b.name) +
              "' (a folder name; not 'trunk', '.' or '..')");
    check(names.insert(b.name).second, "config key experiment.branches: branch '" + b.name + "' appears twice");
  }
  return s;
}

nlohmann::json ExperimentSpec::to_json() const {
  nlohmann::json b = nlohmann::json::array();
  for (const auto& br : branches) b.push_back({{"name", br.name}, {"method", br.method}});
  return {{"seeds", seeds},         {"budget", budget},         {"eval_batches", eval_batches},
          {"save_final", save_final}, {"speed_rounds", speed_rounds}, {"speed_sets", speed_sets},
          {"branches", b}};
}

ExperimentSetup experiment_from_json(nlohmann::json doc) {
  check(doc.is_object(), "experiment config must be a JSON object");
  ExperimentSetup s;
  nlohmann::json spec = nlohmann::json::object();
  if (doc.contains("experiment")) {
    spec = doc["experiment"];
    doc.erase("experiment");
  }
  // The base config's method section is a template the branches complete (a branch names the
  // method); the base run itself is ordinary training.
  nlohmann::json base_doc = doc;
  base_doc.erase("method");
  s.base = RunConfig::from_json(base_doc);
  s.spec = ExperimentSpec::from_json(spec);
  s.doc = doc;
  if (s.spec.seeds.empty()) s.spec.seeds.push_back(s.base.train.seed);
  // Every branch must be a valid config now, not after an hour of training.
  for (const auto& b : s.spec.branches) {
    const RunConfig cfg = branch_config(s, b, s.spec.seeds.front());
    try {
      make_planners(cfg);
    } catch (const Error& e) {
      fail("experiment branch '" + b.name + "': " + e.what());
    }
  }
  check(s.spec.branches.front().method.is_object() && s.spec.branches.front().method.value("name", "saf") == "none",
        "experiment: the first branch is the reference and must be ordinary attention (method.name = \"none\")");
  return s;
}

ExperimentSetup load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json doc = read_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  try {
    return experiment_from_json(std::move(doc));
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
}

RunConfig branch_config(const ExperimentSetup& setup, const ExperimentBranch& branch, int64_t seed) {
  nlohmann::json doc = setup.doc;
  doc["train"]["seed"] = seed;
  if (branch.method.is_array()) {
    doc["method"] = branch.method;  // a stack replaces the config's method section
  } else {
    if (!doc.contains("method") || !doc["method"].is_object() || branch.method.value("name", "") == "none")
      doc["method"] = nlohmann::json::object();
    for (auto it = branch.method.begin(); it != branch.method.end(); ++it) doc["method"][it.key()] = it.value();
  }
  try {
    return RunConfig::from_json(doc);
  } catch (const Error& e) {
    fail("experiment branch '" + branch.name + "': " + e.what());
  }
}

}  // namespace hw

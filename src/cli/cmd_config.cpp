// headwise config [--config FILE] [--set k=v]... [--method NAME]...
// The resolved run config with every default filled in -- what `train` would run and write as
// RUN/config.json -- without building a model or reading data. With no --config it starts from
// an empty document (all defaults); --method NAME appends a method with its defaults, so
// `headwise config --method saf` lists every key SAF takes (docs/configuration.md is checked
// against this output by the docs test).
#include <cstdio>

#include "cli/commands.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/train/planner.hpp"
#include "headwise/train/run_config.hpp"

namespace hw::cli {

namespace {
struct ConfigArgs {
  std::string config;
  std::vector<std::string> sets, methods;
};
}  // namespace

void add_config_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  CLI::App* cmd = app.add_subcommand("config", "Print a run config with every default filled in (no training)");
  cmd->add_option("--config", args->config, "JSON config to resolve (default: an empty one, all defaults)");
  cmd->add_option("--set", args->sets, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--method", args->methods, "Append a method with its default keys (repeatable)");
  cmd->callback([args] {
    nlohmann::json doc = args->config.empty() ? nlohmann::json::object() : read_json_file(args->config);
    if (!args->methods.empty()) {
      nlohmann::json list = nlohmann::json::array();
      if (doc.contains("method") && doc["method"].is_array()) list = doc["method"];
      else if (doc.contains("method") && doc["method"].is_object() && doc["method"].value("name", "") != "none")
        list.push_back(doc["method"]);
      for (const std::string& m : args->methods) list.push_back({{"name", m}});
      doc["method"] = list;
    }
    for (const std::string& s : args->sets) apply_override(doc, s);
    RunConfig cfg = RunConfig::from_json(doc);
    nlohmann::json out = cfg.to_json();
    const auto planners = make_planners(cfg);  // each method's own keys, defaults filled in
    if (planners.size() == 1) out["method"] = planners.front()->config();
    else if (!planners.empty()) {
      out["method"] = nlohmann::json::array();
      for (const auto& p : planners) out["method"].push_back(p->config());
    }
    std::printf("%s\n", out.dump(2).c_str());
  });
}

}  // namespace hw::cli

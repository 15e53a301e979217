#pragma once
// The methods this build knows, looked up by `method.name`. Each folder src/methods/<name>/
// with an entry.cpp defines `MethodEntry method_entry_<name>()`; CMake generates the table
// from the folders (build/generated/method_table.cpp), so neither the trainer, the config, the
// CLI nor this file names any method.
//
// A run's `method` section is one method object or a list of them, applied in order at each
// step (each with its own schedule); every key but "name" belongs to that method, which parses,
// defaults, validates and writes back its own keys (an unknown key is an error naming the
// method and the key).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/train/planner.hpp"

namespace CLI {
class App;
}

namespace hw {

struct MethodEntry {
  std::string name;     // method.name
  std::string summary;  // one line for --help and error messages
  // A planner from one method object (`where` names it in errors: "method" or "method[1]"),
  // validated against the run (an action beyond train.steps is an error naming the key).
  std::unique_ptr<Planner> (*make)(const nlohmann::json& spec, const std::string& where, const RunConfig& cfg);
  // The method's own `headwise` subcommands (AoH's `heads`), or null: main() adds those of
  // every method, so the CLI names none.
  void (*add_commands)(CLI::App& app) = nullptr;
};

const std::vector<MethodEntry>& method_table();

// The entry of `name`, or an error listing the available methods.
const MethodEntry& find_method(const std::string& name, const std::string& where);

// The planners of a run's method list, in order (empty for ordinary training).
std::vector<std::unique_ptr<Planner>> make_planners(const RunConfig& cfg);

// The first step (in [0, train.steps]; train.steps = after the last update) at which any of
// the planners acts, or -1.
int64_t first_action_step(const std::vector<std::unique_ptr<Planner>>& planners, int64_t steps);

}  // namespace hw

// AAH's entry in the method table (method.name = "aah"); the table is generated from the
// folders under src/methods/ (method_registry.hpp).
#include "headwise/methods/aah/planner.hpp"
#include "headwise/methods/method_registry.hpp"

namespace CLI {
class App;
}

namespace hw {

namespace aah {
void add_commands(CLI::App& app);  // headwise aah-table (cmd_table.cpp)
}

namespace {
std::unique_ptr<Planner> make_aah(const nlohmann::json& spec, const std::string& where, const RunConfig& cfg) {
  return std::make_unique<AahPlanner>(aah::AahConfig::from_json(spec, where), cfg);
}
}  // namespace

MethodEntry method_entry_aah() {
  return {"aah",
          "Asymmetric Attention Heads: a seeded hierarchical controller sets every head's causal window during training",
          &make_aah, &aah::add_commands};
}

}  // namespace hw

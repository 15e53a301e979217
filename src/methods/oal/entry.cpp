// OAL's entry in the method table (method.name = "oal"); the table is generated from the
// folders under src/methods/ (method_registry.hpp).
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/oal/planner.hpp"

namespace CLI {
class App;
}

namespace hw {

namespace oal {
void add_commands(CLI::App& app);  // headwise oal-stats, oal-tables (cmd_stats.cpp, cmd_tables.cpp)
}

namespace {
std::unique_ptr<Planner> make_oal(const nlohmann::json& spec, const std::string& where, const RunConfig& cfg) {
  return std::make_unique<OalPlanner>(oal::OalConfig::from_json(spec, where), cfg);
}
}  // namespace

MethodEntry method_entry_oal() {
  return {"oal",
          "Outlier-Aware Attention Linearization: contribution-grouped quadratic kernels (linear heads) with fitted L, "
          "plus LoRA",
          &make_oal, &oal::add_commands};
}

}  // namespace hw

// AoH's entry in the method table (method.name = "aoh"); the table is generated from the
// folders under src/methods/ (method_registry.hpp).
#include "headwise/methods/aoh/planner.hpp"
#include "headwise/methods/method_registry.hpp"

namespace CLI {
class App;
}

namespace hw {

namespace aoh {
void add_commands(CLI::App& app);  // headwise heads (cmd_heads.cpp)
}

namespace {
std::unique_ptr<Planner> make_aoh(const nlohmann::json& spec, const std::string& where, const RunConfig& cfg) {
  return std::make_unique<AohPlanner>(aoh::AohConfig::from_json(spec, where), cfg);
}
}  // namespace

MethodEntry method_entry_aoh() {
  return {"aoh",
          "Autonomy-of-Heads: data-free; KV heads with the most diffuse query-key spectra become sink_window "
          "streaming heads",
          &make_aoh, &aoh::add_commands};
}

}  // namespace hw

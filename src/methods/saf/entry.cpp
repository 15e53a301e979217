// SAF's entry in the method table (method.name = "saf"); the table is generated from the
// folders under src/methods/ (method_registry.hpp).
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/saf/planner.hpp"

namespace hw {

namespace {
std::unique_ptr<Planner> make_saf(const nlohmann::json& spec, const std::string& where, const RunConfig& cfg) {
  return std::make_unique<SafPlanner>(saf::SafConfig::from_json(spec, where), cfg);
}
}  // namespace

MethodEntry method_entry_saf() {
  return {"saf", "Selective Attention Freezing: replace the lowest-variance heads by fitted static patterns",
          &make_saf};
}

}  // namespace hw

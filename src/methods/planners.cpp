#include "headwise/methods/planners.hpp"

#include "headwise/core/error.hpp"
#include "headwise/methods/saf_planner.hpp"

namespace hw {

std::unique_ptr<Planner> make_planner(const RunConfig& cfg) {
  if (cfg.method.name == "none") return nullptr;
  if (cfg.method.name == "saf") return std::make_unique<SafPlanner>(cfg);
  fail("method.name = \"" + cfg.method.name + "\" is not available in this build");
}

}  // namespace hw

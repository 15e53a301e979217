#include "headwise/methods/planners.hpp"

#include "headwise/core/error.hpp"

namespace hw {

std::unique_ptr<Planner> make_planner(const RunConfig& cfg) {
  if (cfg.method.name == "none") return nullptr;
  fail("method.name = \"" + cfg.method.name + "\" is not available in this build");
}

}  // namespace hw

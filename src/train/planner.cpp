#include "headwise/train/planner.hpp"

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw {

void Planner::restore(const nlohmann::json& state) {
  check(state.is_null(), "planner state of '" + name() + "': this method keeps no state, got " + json_brief(state));
}

}  // namespace hw

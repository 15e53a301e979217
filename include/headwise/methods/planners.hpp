#pragma once
// Builds the planner a run's `method` section asks for (nullptr for method.name = "none").
#include <memory>

#include "headwise/train/planner.hpp"

namespace hw {

std::unique_ptr<Planner> make_planner(const RunConfig& cfg);

}  // namespace hw

#pragma once
// The interface between the trainer and a head-replacement method. A planner calibrates,
// scores, selects and fits, then hands back a new plan plus the values of new static/linear
// heads; the trainer installs it in place (parameters and AdamW state) and continues with the
// same data order. The trainer knows methods only through this interface.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "headwise/attention/head_plan.hpp"
#include "headwise/model/gpt.hpp"
#include "headwise/train/run_config.hpp"

namespace hw {
namespace dist {
class Comm;
}

struct PlanChange {
  attn::HeadPlan plan;
  HeadExtras extras;
  nlohmann::json report;  // written to RUN/intervention.json
};

struct InterventionContext {
  Model<float>& model;
  const RunConfig& cfg;
  dist::Comm& comm;
  int64_t step;  // the update about to run
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  // The update at whose top the planner fires (-1: never).
  virtual int64_t fire_step() const = 0;
  // Must not move the training data position or change any weight or optimizer state.
  virtual PlanChange plan(InterventionContext& ctx) = 0;
};

}  // namespace hw

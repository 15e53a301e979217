#pragma once
// The interface between the trainer and a head-replacement method (a planner). The trainer
// knows methods only through it; each method lives in its own folder under src/methods/ and
// parses its own `method.*` keys (src/methods/method_registry.hpp).
//
// At the top of every update the trainer asks each planner, in the order of the run's method
// list, whether it acts at this step. A planner that acts calibrates, scores, selects and fits
// (without moving the training data position or changing any weight or optimizer state) and
// may hand back a plan change: a new head plan plus the values of new static/linear heads,
// which the trainer installs in place and logs (RUN/interventions/). Whatever a planner needs
// to continue (statistics, counters, RNG state) it returns from state(); the trainer stores it
// in every checkpoint and hands it back to restore() on --resume, so a resumed run equals the
// uninterrupted one bit for bit.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "headwise/attention/head_plan.hpp"
#include "headwise/model/model.hpp"
#include "headwise/train/run_config.hpp"

namespace hw {
namespace dist {
class Comm;
}

struct PlanChange {
  attn::HeadPlan plan;
  HeadExtras extras;
  // LoRA adapters to add with the plan (the model must have none yet): installed by
  // Model::add_adapters after the plan, A drawn from the run's seed and this step, B zero.
  std::optional<LoraConfig> adapters;
  nlohmann::json report;  // logged as RUN/interventions/step_<N>.<planner>.json
};

// The seed a PlanChange's new adapters draw from: the run's train.seed and the step they arrive at.
uint64_t adapter_init_seed(int64_t run_seed, int64_t step);

// Sequences to calibrate on that a caller hands a planner instead of the run's own data (e.g.
// `headwise mqar` gives its task's examples): sequence i's seq_len inputs and targets (-1 = no
// loss there). A planner that calibrates on data uses them when present.
struct CalibrationSequences {
  int64_t seq_len = 0;
  std::function<void(int64_t index, int32_t* inputs, int32_t* targets)> fetch;
};

struct PlannerContext {
  Model<float>& model;  // holds the current head plan (model.config().head_plan)
  const RunConfig& cfg;
  dist::Comm& comm;
  int64_t step;  // the update about to run
  const CalibrationSequences* calibration = nullptr;  // null: the planner's own data
};

class Planner {
 public:
  virtual ~Planner() = default;
  // The method's name (`method.name`).
  virtual std::string name() const = 0;
  // The planner's whole configuration with defaults filled in, as a `method` object (name
  // included): what config.json records and what from_json would rebuild the same planner from.
  virtual nlohmann::json config() const = 0;
  // Whether the planner acts at the top of update `step` (0 <= step <= train.steps; step ==
  // train.steps means after the last update, before the final evaluation and checkpoint).
  virtual bool acts_at(int64_t step) const = 0;
  // Act: a plan change, or nothing when the planner looked and kept the plan. Collective: every
  // rank calls it at the same step and must return the same change.
  virtual std::optional<PlanChange> act(PlannerContext& ctx) = 0;
  // Whether the planner observes the training forwards (and backwards, if it wants them) of
  // update `step`: asked before the update; when it says yes, observer() sees every layer of
  // every micro-step of that update on this rank (statistics meant to agree across ranks must be
  // reduced in act()). When no planner asks, the update does no observation work at all.
  virtual bool observes_at(int64_t /*step*/) const { return false; }
  // The observer for the updates observes_at asked for (see model/attention_observer.hpp).
  virtual AttentionObserver* observer() { return nullptr; }
  // The model tensors act() reads (names as Model::specs() gives them), or nullopt for any of
  // them (the default). A caller that loads a model for this planner alone (convert) reads only
  // these from the checkpoint: the others then hold zeros, cost no memory, and are copied into
  // the converted checkpoint as they were (a method that scores heads from their attention
  // weights reads those of a 1B model only).
  virtual std::optional<std::set<std::string>> weights_read(const ModelConfig& /*model*/) const {
    return std::nullopt;
  }
  // Whether act() runs backward passes (a score from gradients), so that a caller that loads a
  // model for it alone gives that model a gradient block; none is made otherwise.
  virtual bool needs_gradients() const { return false; }
  // What the planner needs to continue after a resume (null: nothing).
  virtual nlohmann::json state() const { return nullptr; }
  // Restore what state() returned; called on --resume before the first update. The state comes
  // from a file (trainer.json): a planner checks every range and partition in it against the
  // model and throws one hw::Error naming the key. The default (a planner with no state) refuses
  // anything but null.
  virtual void restore(const nlohmann::json& state);
};

}  // namespace hw

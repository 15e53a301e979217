#pragma once
// One registered method applied to a finished model with no data and no training (convert,
// bench-infer --method): the method's planner is built through the registry for a run whose model
// is the model's own and whose data section is empty, acts once (at the first update it would act
// at), and its change (plan, head values, adapters) is installed in place. A method that
// calibrates on data reads it from `calib_glob` (the run's data.calib) when one is given; without
// one, and for methods that observe training forwards, it stops with one error saying so.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "headwise/model/model.hpp"
#include "headwise/train/planner.hpp"
#include "headwise/train/run_config.hpp"

namespace hw::cli {

struct DataFreeChange {
  nlohmann::json method;            // the planner's whole configuration (defaults filled in)
  int64_t step = -1;                // the update it acted at
  std::optional<PlanChange> change;  // empty: it looked and kept the plan
  bool layout_kept = true;
  double act_seconds = 0, install_seconds = 0;  // the planner's act, the change's install
};

// A method's planner, built for a model of config `mc` before the model exists (so that the
// caller can load the model as the planner needs it: Planner::weights_read, needs_gradients).
struct DataFreeMethod {
  std::string name, who;
  RunConfig cfg;
  std::unique_ptr<Planner> planner;
  int64_t step = -1;  // the first update it acts at
};

// `sets` are method.<key>=value overrides; errors are prefixed with `who` (e.g. "convert --method aoh").
// `seq_len` is the context the converted model is meant for (train.seq_len; 0 = model.block_size):
// a method that calibrates does so at that length unless its own keys say otherwise.
DataFreeMethod prepare_data_free_method(const ModelConfig& mc, const std::string& method,
                                        const std::vector<std::string>& sets, const std::string& who,
                                        const std::string& calib_glob = "", int64_t seq_len = 0);
// Let the prepared planner act on `model` (of the config it was prepared for) and install its change.
DataFreeChange apply_data_free_method(Model<float>& model, DataFreeMethod& prepared);
// Both at once.
DataFreeChange apply_data_free_method(Model<float>& model, const std::string& method,
                                      const std::vector<std::string>& sets, const std::string& who,
                                      const std::string& calib_glob = "", int64_t seq_len = 0);

}  // namespace hw::cli

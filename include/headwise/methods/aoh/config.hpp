#pragma once
// AoH's `method.*` keys (method.name = "aoh"), parsed, defaulted and validated here and nowhere
// else. Defaults follow the AoH paper (arXiv 2608.06849): DuoAttention's S = 64, W = 256.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "headwise/train/run_config.hpp"

namespace hw::aoh {

struct AohConfig {
  double sparsity = 0.5;     // fraction of the scored KV heads that stream
  int64_t sink = 64;         // streaming heads: the first `sink` keys ...
  int64_t window = 256;      // ... and the last `window` keys (sink_window:sink:window)
  bool per_layer = false;    // false: one threshold over all layers; true: the fraction per layer
  // "spectrum" (the method): the highest effective ranks stream; "random": the same number of
  // KV heads drawn uniformly from `seed` (the control that shows whether the spectrum matters).
  std::string selection = "spectrum";
  int64_t seed = 0;
  double at_fraction = 0.0;  // acts at round(at_fraction * train.steps) (0: before the first update) ...
  int64_t at_step = -1;      // ... or at this update when >= 0
  std::string where = "method";

  // From one method object (its "name" must be "aoh"). Unknown keys and out-of-range values are
  // errors naming the key.
  static AohConfig from_json(const nlohmann::json& spec, const std::string& where = "method");
  nlohmann::json to_json() const;  // every key, "name" included

  int64_t fire_step(const RunConfig& run) const;
  // The checks that need the run: the action within train.steps, sink + window within
  // model.block_size.
  void check_run(const RunConfig& run) const;
};

}  // namespace hw::aoh

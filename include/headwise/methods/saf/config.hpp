#pragma once
// SAF's `method.*` keys (method.name = "saf"), parsed, defaulted and validated here and nowhere
// else. Defaults follow the SAF paper (arXiv 2609.34650).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "headwise/train/run_config.hpp"

namespace hw::saf {

struct SafConfig {
  double ratio = 0.25;                 // fraction of heads replaced (counted as ratio_of says)
  // What `ratio` counts when some heads are no longer softmax (an earlier SAF, another method):
  // "all" = round(ratio x all heads) more heads, "remaining" = round(ratio x remaining softmax heads).
  // Either way SAF selects only among the heads still softmax and leaves the others as they are.
  std::string ratio_of = "all";
  double at_fraction = 0.5;            // fires at round(at_fraction * train.steps) ...
  int64_t at_step = -1;                // ... or at this update when >= 0 (train.steps or 1.0:
                                       // after the last update, before the final evaluation)
  int64_t calib_seqs = 32;             // calibration sequences (>= 2: variance needs two)
  int64_t calib_seq_len = 0;           // 0 = train.seq_len
  std::string selector = "variance";   // variance | kl | random | gate_taylor
  std::string pattern = "mean";        // mean | sharp_mean | gaussian | dirichlet | structured_random
  std::string mode = "freeze";         // freeze | prune
  int64_t fit_steps = 400;
  double fit_lr = 0.05;
  double max_kl = 0.2;
  int64_t seed = 0;                    // 0 = train.seed + 1
  double memory_budget_mb = 1024;      // calibration statistics budget
  std::string capture = "backend";     // backend (fp32 softmax tiles, CPU) | reference (host float64)
  std::string where = "method";        // how errors name this object (from_json's `where`)

  // From one method object (its "name" must be "saf"); `where` names it in errors ("method",
  // "method[1]"). Unknown keys and out-of-range values are errors naming the key.
  static SafConfig from_json(const nlohmann::json& spec, const std::string& where = "method");
  nlohmann::json to_json() const;  // every key, "name" included

  // The update at whose top SAF fires: at_step if >= 0, else round(at_fraction * steps);
  // train.steps itself means after the last update.
  int64_t fire_step(const RunConfig& run) const;
  // An error naming the key (at_step or at_fraction) when fire_step(run) > train.steps.
  void check_fire_step(const RunConfig& run) const;
  // Seed of SAF's own streams: seed, or train.seed + 1 when it is 0.
  uint64_t stream_seed(const RunConfig& run) const;
  // Calibration length: calib_seq_len, or train.seq_len when it is 0.
  int64_t calib_length(const RunConfig& run) const;
};

}  // namespace hw::saf

#pragma once
// The `method` object of OAL (method.name = "oal"); every key is optional:
//   layers          "3-20", "1,4,7" or a list [3, 4]: the layers whose heads become linear
//                   ("" = every layer); a layer outside the model is an error
//   kernel          "oal" (the grouped quadratic kernel: head kind linear) | "performer" |
//                   "dijiang" | "taylorshift": the kind the chosen heads become (baselines.hpp;
//                   a baseline skips the statistics, grouping and calibration of L)
//   performer_features   250   random features per head of kernel = "performer"
//   grouping        "bootstrap" | "fixed:G" (1 <= G <= head_dim) | "random"
//   tail_fraction, ratio_threshold, support, bootstrap, min_groups, max_groups: the bootstrap
//                   grouping (grouping.hpp; defaults 0.25, 1.5, 0.9, 1000, 2, 5)
//   stats_prompts   40   prompts of the contribution statistics
//   stats_seq_len   0    their length (0 = calib_seq_len)
//   fit_seqs, val_seqs   8, 2   calibration sequences of L (fit, validation)
//   calib_seq_len   0    their length (0 = train.seq_len)
//   lr, max_updates, positions, val_every, patience, grad_clip, perturb_std: the fit of L
//                   (calibrate.hpp; defaults 0.02, 1000, 32, 100, 400, 10, 0.05)
//   lora_rank, lora_alpha, lora_dropout, lora_freeze_base: the adapters handed back with the
//                   plan (8, 16, 0.05, true; rank 0 = none), on q/k/v/o of every layer
//   seed            0 (= train.seed + 1)   all of OAL's draws
//   at_step         0    the update it acts at
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/methods/oal/baselines.hpp"
#include "headwise/methods/oal/calibrate.hpp"
#include "headwise/methods/oal/grouping.hpp"
#include "headwise/model/lora_config.hpp"
#include "headwise/train/run_config.hpp"

namespace hw::oal {

struct OalConfig {
  std::string where = "method";
  nlohmann::json layers_spec = "";  // as given
  std::string kernel = "oal";
  int64_t performer_features = 250;
  std::string grouping = "bootstrap";
  GroupingOptions group;
  int64_t stats_prompts = 40, stats_seq_len = 0;
  int64_t fit_seqs = 8, val_seqs = 2, calib_seq_len = 0;
  CalibOptions calib;
  int64_t lora_rank = 8;
  double lora_alpha = 16.0, lora_dropout = 0.05;
  bool lora_freeze_base = true;
  int64_t seed = 0;
  int64_t at_step = 0;

  static OalConfig from_json(const nlohmann::json& spec, const std::string& where);
  nlohmann::json to_json() const;
  // The layers to convert for a model of n_layer layers (ascending, unique); errors name the key.
  std::vector<int> layers(int n_layer) const;
  GroupingSpec grouping_spec(int head_dim) const;
  KernelKind kernel_kind() const;
  uint64_t stream_seed(const RunConfig& run) const;
  int64_t calib_length(const RunConfig& run) const;
  int64_t stats_length(const RunConfig& run) const;
  LoraConfig adapters() const;  // rank 0: disabled
  // Checks against the run (layers and G against the model, lengths against block_size, at_step).
  void check_run(const RunConfig& run) const;
};

// "3-20", "1,4,7", "5" or a JSON list of integers -> ascending unique layers in [0, n_layer).
std::vector<int> parse_layers(const nlohmann::json& spec, int n_layer, const std::string& key);

}  // namespace hw::oal

#pragma once
// OAL's three offline stages for the chosen layers of a live model, shared by the planner and
// the experiment tables: (1) contribution statistics on the stats prompts, (2) a grouping per
// query head, (3) the calibration of every head's L on fit/validation sequences. Heads are
// independent and run in parallel (OpenMP); every draw comes from the head's own seed, so the
// result does not depend on the thread count.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "headwise/methods/oal/calibrate.hpp"
#include "headwise/methods/oal/capture.hpp"
#include "headwise/methods/oal/config.hpp"
#include "headwise/methods/oal/contribution.hpp"
#include "headwise/methods/oal/grouping.hpp"

namespace hw::oal {

// Where the stages read their sequences: stats prompts 0..P-1 of `stats`, fit and validation
// sequences 0..fit+val-1 of `calib` (the first `fit` are the fit set).
struct Sources {
  SequenceSource stats, calib;
  int64_t stats_T = 0, calib_T = 0;
};

// Seeds of one head (flat = layer * n_head + head).
uint64_t bootstrap_seed(uint64_t seed, int flat);
uint64_t random_grouping_seed(uint64_t seed, int flat);
uint64_t calibration_seed(uint64_t seed, int flat);

// The grouping of one head under `spec` (random: the bootstrap grouping's sizes, shuffled).
Grouping group_head(const HeadContribution& c, const GroupingSpec& spec, const GroupingOptions& opt, uint64_t seed,
                    int n_head);

// One head's calibration data inside captured fit/validation activations.
HeadSamples head_samples(const Model<float>& model, const CapturedQkv& c, int slot, int h, int n_fit);

struct HeadResult {
  int layer = 0, head = 0;
  Grouping grouping;
  HeadCalibration calibration;
};

struct PipelineResult {
  std::vector<int> layers;
  std::vector<HeadContribution> contributions;  // per head of the layers, layer-major
  std::vector<HeadResult> heads;
  double stats_seconds = 0, calib_seconds = 0;
  nlohmann::json to_json() const;  // contributions, groupings and calibrations per head
};

// Runs the three stages. batch = rows per capture forward.
PipelineResult run_pipeline(Model<float>& model, const OalConfig& cfg, const Sources& src, uint64_t seed, int batch);

}  // namespace hw::oal

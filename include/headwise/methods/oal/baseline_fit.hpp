#pragma once
// A fit of a baseline head's few learnable values (DiJiang's log_w, TaylorShift's tau) to the
// softmax outputs on frozen Q/K/V with L's protocol (calibrate.hpp: Adam at CalibOptions.lr on
// the normalised-output MSE at `positions` random causal positions of a random fit sequence per
// update, validation every val_every, patience, gradient-norm clip, the best by validation kept).
// The paper fits only OAL's and the global kernel's L; Table 2 shows these fits as extra rows
// (`dijiang_fitted`, `taylorshift_fitted`) beside the unfitted baselines, to tell how much of a
// baseline's error its starting values explain. Performer has nothing to fit.
#include <cstdint>

#include "headwise/methods/oal/baselines.hpp"
#include "headwise/methods/oal/calibrate.hpp"

namespace hw::oal {

// Mean over the n positions and d channels of (y_hat - target)^2 (targets [n][d]) and, when grad
// is given, its gradient with respect to the head's learnable values added into grad (dijiang:
// d entries for log_w; taylorshift: one for tau).
double baseline_loss(const HeadRows& h, const BaselineHead& b, const int* positions, int n, const double* targets,
                     double* grad);
int baseline_params(const BaselineHead& b);  // dijiang: head_dim; taylorshift: 1; performer: 0

struct BaselineFit {
  BaselineHead head;  // the best by validation MSE (the start if nothing beat it)
  double init_val_mse = 0.0, val_mse = 0.0;
  int updates = 0, best_update = 0;
};

BaselineFit fit_baseline(const HeadSamples& s, const BaselineHead& start, const CalibOptions& opt, uint64_t seed);

}  // namespace hw::oal

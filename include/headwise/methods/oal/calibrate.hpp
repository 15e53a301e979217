#pragma once
// Calibration of one head's L on frozen Q/K/V against the softmax outputs (paper Eq. (20),
// App. B): Adam (lr 0.02) on the mean squared error of the normalised outputs, each update on
// one fit sequence drawn at random with `positions` causal query positions drawn at random;
// at most max_updates updates; the validation MSE (every position of the validation
// sequences) is measured before the first update and every val_every updates, the fit stops
// once `patience` updates passed without a better one, and the best L by validation MSE is
// kept; the gradient norm is clipped to grad_clip. Every draw comes from the seed alone.
//
// calibrate_head runs the paper's candidate protocol: the learned global kernel (G = 1, from the
// Taylor initialisation and from perturbed Taylor initialisations) and, for G > 1, three
// initialisations of the grouped kernel (the embedded global kernel, the second-order Taylor
// kernel, the embedded global kernel plus Gaussian noise), the best kept by validation MSE.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/methods/oal/kernel.hpp"
#include "headwise/methods/oal/loss_moments.hpp"

namespace hw::oal {

struct CalibOptions {
  double lr = 0.02;
  int max_updates = 1000;
  int positions = 32;
  int val_every = 100;
  int patience = 400;
  double grad_clip = 10.0;
  double perturb_std = 0.05;  // the perturbed initialisations' noise on every lower-triangle entry
  double eps = 1e-6;          // the kernel's epsilon (model.linear_eps)
};

// A head's calibration data: fit and validation sequences, and the softmax outputs of every
// position of each (filled by prepare_targets).
struct HeadSamples {
  std::vector<HeadRows> fit, val;
  std::vector<std::vector<double>> fit_targets;  // [fit seq][T * d]
  std::vector<std::vector<double>> val_targets;  // [val seq][T * d]
  void prepare_targets();
};

// Mean over validation sequences, positions and channels of the squared error.
double validation_mse(const HeadSamples& s, const GroupedKernel& k);

// The loss moments (loss_moments.hpp: kernel moments folded with the targets) of every fit and
// validation sequence for one grouping: what a fit of that grouping evaluates its loss from.
// Needs prepare_targets first.
struct SampleMoments {
  std::vector<LossMoments> fit, val;
};
SampleMoments sample_moments(const HeadSamples& s, const std::vector<int32_t>& groups, int G);
// The global kernel's moments from a grouping's (global_moments of loss_moments.hpp, sequence by
// sequence), for a fraction of kernel_moments' products.
SampleMoments global_moments(const SampleMoments& grouped);
// validation_mse from the moments (the same number up to rounding).
double validation_mse(const HeadSamples& s, const SampleMoments& m, const GroupedKernel& k);

struct FitResult {
  GroupedKernel kernel;  // the best by validation MSE (the initialisation if nothing beat it)
  double init_val_mse = 0.0, val_mse = 0.0;
  int updates = 0;       // updates made before stopping
  int best_update = 0;   // the update count of the kept L (0: the initialisation)
  nlohmann::json to_json() const;
};

FitResult fit_kernel(const HeadSamples& s, GroupedKernel init, const CalibOptions& opt, uint64_t seed);
// The same with the moments of init's grouping computed once by the caller.
FitResult fit_kernel(const HeadSamples& s, const SampleMoments& m, GroupedKernel init, const CalibOptions& opt,
                     uint64_t seed);

// The protocol above for any parameter vector theta (L, or a baseline's learnable values):
// loss adds d MSE / d theta at the drawn positions of one fit sequence into grad; validate gives
// the validation MSE of a theta. fit_kernel and fit_baseline (baseline_fit.hpp) are this fit.
using FitLoss = std::function<void(int seq, const HeadRows& h, const std::vector<double>& theta,
                                   const int* positions, int n, const double* targets, double* grad)>;
using FitValidation = std::function<double(const std::vector<double>& theta)>;
struct AdamFit {
  std::vector<double> best;  // the best theta by validation MSE (the start if nothing beat it)
  double init_val_mse = 0.0, val_mse = 0.0;
  int updates = 0, best_update = 0;
};
AdamFit adam_fit(const HeadSamples& s, std::vector<double> theta, const CalibOptions& opt, uint64_t seed,
                 const FitLoss& loss, const FitValidation& validate);

struct HeadCalibration {
  FitResult global;          // the learned global kernel (G = 1)
  FitResult kernel;          // the chosen kernel for the head's grouping (== global when G = 1)
  std::string chosen;        // which candidate won: taylor, perturbed_taylor_<n>, embedded_global, ...
  double taylor_val_mse = 0.0;  // the G = 1 Taylor kernel, unfitted
  nlohmann::json candidates = nlohmann::json::array();
  nlohmann::json to_json() const;
};

// The global kernel of `s` alone (three candidates), reusable across groupings of the same head.
HeadCalibration calibrate_global(const HeadSamples& s, const CalibOptions& opt, uint64_t seed);
// The same from the global moments (sample_moments with every dimension in group 1, or
// global_moments of a grouping's).
HeadCalibration calibrate_global(const HeadSamples& s, const SampleMoments& global, const CalibOptions& opt,
                                 uint64_t seed);
// The kernel of `groups` (G groups) from a head whose global kernel is already fitted.
void calibrate_grouped(HeadCalibration& c, const HeadSamples& s, int G, const std::vector<int32_t>& groups,
                       const CalibOptions& opt, uint64_t seed);
// The same from that grouping's moments (sample_moments(s, groups, G)).
void calibrate_grouped(HeadCalibration& c, const HeadSamples& s, const SampleMoments& grouped, int G,
                       const std::vector<int32_t>& groups, const CalibOptions& opt, uint64_t seed);

}  // namespace hw::oal

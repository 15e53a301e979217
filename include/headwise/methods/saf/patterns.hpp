#pragma once
// SAF target patterns: the causal row-stochastic T x T matrix a frozen head should imitate,
// built from its calibration statistics (stats.hpp). The compact fit (fit.hpp) then turns the
// pattern into alpha/rho vectors. All outputs are dense T x T row-major with zeros above the
// diagonal. Random patterns are deterministic given the Rng state.
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/methods/saf/stats.hpp"

namespace hw::saf {

enum class PatternKind { Mean, SharpMean, Gaussian, Dirichlet, StructuredRandom };

// Text names: "mean", "sharp_mean", "gaussian", "dirichlet", "structured_random".
PatternKind parse_pattern(const std::string& name);  // throws hw::Error naming the text
std::string pattern_name(PatternKind kind);
// The statistics a pattern needs (the selection score adds its own, e.g. kl).
StatsNeeds needs_for(PatternKind kind);
// Structured random is the only pattern that skips the KL gate (it is not fitted).
inline bool pattern_is_fitted(PatternKind kind) { return kind != PatternKind::StructuredRandom; }

// An Rng for one head, derived from a base seed and the flat head index l * H + h, so that a
// head's random pattern does not depend on which other heads were drawn or in what order.
Rng head_rng(uint64_t seed, int flat_head_index);

// Causal softmax of the rows of a T x T logit matrix (cells j > i ignored, output 0 there).
void causal_softmax(const double* logits, int T, double* out);

// Post-softmax mean: P = mean of the A_n.
void mean_pattern(const HeadStatsAccumulator& stats, double* out);
// Sharp mean: causal softmax of the mean raw logits.
void sharp_mean_pattern(const HeadStatsAccumulator& stats, double* out);
// Gaussian: logit mean + logit std (unbiased) * N(0, 1), one draw per causal cell in
// row-major order, then causal softmax.
void gaussian_pattern(const HeadStatsAccumulator& stats, Rng& rng, double* out);

// Dirichlet per row, fitted by moments (methods.md): mu = mean row (+1e-12, renormalised),
// v = per-cell unbiased variance; concentration c = (1 - ||mu||^2) / sum v - 1, set to
// max_concentration when sum v or 1 - ||mu||^2 is <= 1e-8, to min when non-finite or <= 0,
// then clamped to [min, max]. The row is drawn as Dirichlet(max(mu_j c, 1e-6)) via Gamma draws
// normalised in log space (tiny shapes would underflow a plain Gamma draw). Deterministic rows
// (a single key, sum v <= 1e-8 or 1 - ||mu||^2 <= 1e-8) keep the mean and draw nothing.
struct DirichletOptions {
  double min_concentration = 1e-2;
  double max_concentration = 1e6;
  double shape_floor = 1e-6;
};
struct DirichletInfo {
  std::vector<double> concentration;  // per row
  std::vector<uint8_t> deterministic;  // per row: 1 if the row kept the mean
};
void dirichlet_pattern(const HeadStatsAccumulator& stats, Rng& rng, double* out,
                       const DirichletOptions& opt = {}, DirichletInfo* info = nullptr);
// The same from explicit dense mean and per-cell variance matrices (T x T).
void dirichlet_pattern(const double* mean, const double* variance, int T, Rng& rng, double* out,
                       const DirichletOptions& opt = {}, DirichletInfo* info = nullptr);

// log of one Gamma(shape, 1) draw: Marsaglia-Tsang for shape >= 1; for shape < 1 the boost
// Gamma(a) = Gamma(a + 1) * U^(1/a), taken in log space so it never underflows.
double log_gamma_draw(double shape, Rng& rng);

// Structured random control: alpha and rho (length T each) iid N(0, std^2), alpha first.
// Not fitted and not KL-gated.
void structured_random(int T, Rng& rng, std::vector<double>& alpha, std::vector<double>& rho,
                       double std_dev = 1.0);

}  // namespace hw::saf

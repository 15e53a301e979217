#pragma once
// SAF compact fit (paper Eq. (3)-(4), methods.md): approximate a causal row-stochastic target
// P (T x T) by P_hat(i, j) = exp(alpha_j + rho_{i-j} - log_z_i), j <= i, fitted by row-wise
// cross-entropy. The loss depends on P only through its column marginal c and distance
// marginal d, so the fit never touches P after marginals().
#include <vector>

namespace hw::saf {

struct FitOptions {
  int steps = 400;  // Adam steps
  double lr = 0.05;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Sufficient statistics of a target: Pn = max(P, 1e-9) on the causal cells, rows
// renormalised; c_j = sum_i Pn[i, j], d_k = sum_{i - j = k} Pn[i, j], and
// neg_entropy = sum Pn log Pn / T (the constant that turns the loss into the mean row KL).
struct Marginals {
  int T = 0;
  std::vector<double> c, d;
  double neg_entropy = 0.0;
};
Marginals marginals(const double* P, int T);  // throws hw::Error on a non-finite cell
// The same from a packed lower triangle (row i's cells j <= i start at i(i+1)/2, as
// HeadStatsAccumulator keeps its mean): the mean pattern's marginals without a dense T x T.
// Bit for bit marginals() of the dense matrix.
Marginals marginals_packed(const double* packed, int T);

// Scratch for marginal_loss, sized once per fit (no allocation per step).
struct LossWorkspace {
  std::vector<double> ea, er, er_rev, inv_z, log_z;
  void resize(int T);
};

// loss = (sum_i log_z_i - <c, alpha> - <d, rho>) / T with log_z_i = logsumexp_{j<=i}
// (alpha_j + rho_{i-j}); the mean row cross-entropy of P_hat against Pn. Writes the analytic
// gradient (softmax weight marginals minus c, d, over T) when grad_alpha/grad_rho are non-null.
// Fast path: Z_i = sum_j e^{alpha_j - A} e^{rho_{i-j} - R} with global shifts A = max alpha,
// R = max rho, so a step costs multiply-adds, not exp calls; rows whose shifted Z_i would
// leave the safe floating-point range switch the whole evaluation to an exact per-row
// log-sum-exp path. Both paths are deterministic (each output owned by one loop iteration).
double marginal_loss(const double* alpha, const double* rho, const Marginals& m,
                     double* grad_alpha, double* grad_rho, LossWorkspace& ws);

// Exact per-row log normalisers log_z_i = logsumexp_{j<=i}(alpha_j + rho_{i-j}), i < n.
void log_normalisers(const double* alpha, const double* rho, int n, double* log_z);

struct CompactFit {
  std::vector<double> alpha, rho, log_z;  // length T each
  double loss = 0.0;                      // final cross-entropy term (exact normalisers)
  double kl = 0.0;                        // mean row KL(Pn || P_hat) = neg_entropy + loss
};
// Init alpha = 0, rho_k = log max(d_k / (T - k), 1e-9); Adam (PyTorch's bias-corrected form)
// for opt.steps steps; the result is evaluated with exact normalisers.
CompactFit fit_compact(const Marginals& m, const FitOptions& opt = {});
CompactFit fit_compact(const double* P, int T, const FitOptions& opt = {});

// Dense T x T P_hat from alpha/rho (zeros above the diagonal), exact per-row normalisation.
void compact_pattern(const double* alpha, const double* rho, int T, double* out);

// Extend vectors fitted at length T to the model's n_positions >= T. Rows and keys >= T are
// never used when training at seq_len T, so the padding only has to be harmless and finite:
// alpha is padded with 0, rho with rho[T-1], and log_z is extended with the exact normalisers
// of the padded vectors (rows < T are unchanged: a row's normaliser only sees keys j <= i).
void extend_to_positions(std::vector<double>& alpha, std::vector<double>& rho,
                         std::vector<double>& log_z, int n_positions);
// extend_to_positions's padding of alpha and rho alone (what a model stores: it derives log_z
// itself, for the rows a step reads).
void pad_to_positions(std::vector<double>& alpha, std::vector<double>& rho, int n_positions);

}  // namespace hw::saf

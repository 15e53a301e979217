#pragma once
// Kernel approximations of exp(sum_{r in S} q_r k_r / sqrt(d)) on a subset S of a head's
// dimensions, for the paper's Table 1 (the share of the full-output error kept when only the
// high-contribution dimensions are approximated). Each row of that table is one entry of
// subset_approximators(); a baseline head kind added later becomes a row by adding its entry
// here (its math on a subset of dimensions, in double).
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/methods/oal/kernel.hpp"

namespace hw::oal {

struct SubsetApprox {
  std::string name;
  bool randomized = false;  // averaged over seeds
  // w[j], j = 0..i: the approximate kernel between query i and key j on the dimensions S.
  void (*weights)(const HeadRows& h, const std::vector<int>& S, int i, uint64_t seed, int features, double* w) = nullptr;
};

// performer: positive orthogonal random features (FAVOR+), `features` per head, fixed per seed:
//   phi(x) = exp(w_m . x - |x|^2 / 2) / sqrt(M), x = v / d^(1/4), E[phi(q) . phi(k)] = exp(q.k / sqrt(d)),
//   w_m Gaussian rows orthogonalised in blocks of |S| and rescaled to chi-distributed norms;
// taylor2: the fixed second-order Taylor kernel 1 + s + s^2 / 2 (always positive);
// dijiang: sum_m w_m a_m(q_S) a_m(k_S), a(x) = softmax(C x_S / d^(1/4)), C the orthonormal |S| x |S|
//   DCT-II, the |S| weights at their starting value 1 (the head kind on the subset);
// taylorshift: 1 + s + s^2/2 with s = tau q_S.k_S / (|q_S| |k_S|), tau at its starting value 1.
// (Both baselines' kernels are defined up to a per-query factor, which the normalisation cancels.)
const std::vector<SubsetApprox>& subset_approximators();

// Query i's weights over keys j <= i with S approximated by `a` and every other dimension exact:
//   w_ij = a(q_S, k_S) * exp(sum_{r not in S} q_r k_r / sqrt(d) - max_j (same)),
// (the constant factor cancels in the normalisation). S = every dimension: the full approximation.
void mixed_weights(const HeadRows& h, const SubsetApprox& a, const std::vector<int>& S, int i, uint64_t seed,
                   int features, double* w);

}  // namespace hw::oal

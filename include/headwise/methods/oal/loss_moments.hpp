#pragma once
// A fit's loss from the kernel moments (kernel_moments.hpp) of one sequence and its targets,
// folded into NP (NP + 1) / 2 + NP numbers per position (NP pairs) instead of NP (d + 1). With
// the kernel's pair coefficients c (m_ab of kernel_moments.hpp), z_i = sum_p c_p Z_i^p and the
// deviations D_i^p = P_i^p - Z_i^p t_i (t_i: the target), the normalised output's error is
//   y_i / z_i - t_i = sum_p c_p D_i^p / z_i,   so  ||y_i / z_i - t_i||^2 = c^T H_i c / z_i^2,
// H_i^pq = D_i^p . D_i^q, exactly (t_i's part cancels in D before any sum over pairs). A fit
// evaluates the loss at 32 positions per update and at every validation position between
// updates: this form costs NP^2 per position instead of 2 NP d, and reads 8 (NP^2 / 2 + NP)
// bytes instead of 8 NP d.
#include <cstdint>
#include <vector>

#include "headwise/methods/oal/kernel.hpp"
#include "headwise/methods/oal/kernel_moments.hpp"

namespace hw::oal {

struct LossMoments {
  int T = 0, d = 0, G = 1, pairs = 0;  // as KernelMoments
  std::vector<int32_t> groups;         // [d], 1..G
  std::vector<double> Z;               // [T][pairs]
  std::vector<double> H;               // [T][pairs (pairs + 1) / 2]: H^pq, p <= q, row by row
};

// targets: [T][d], the softmax output at every position of the moments' sequence.
LossMoments loss_moments(const KernelMoments& m, const double* targets);

// kernel_loss's value and gradient (added into dL) at the positions (whose targets are the ones
// the moments were folded with), from the moments of k's grouping.
double moments_loss(const LossMoments& m, const GroupedKernel& k, const int* positions, int n, double* dL);

// The global kernel's moments (G = 1, every dimension in group 1) from a grouping's: the global
// score is the sum of the groups' (s = s_1 + .. + s_G), so its pairs are sums of the grouped
// pairs (Z^01 = sum_b Z^0b, Z^11 = sum_{a,b} Z^ab, D likewise, H the matching sums of H), the
// same numbers up to rounding.
LossMoments global_moments(const LossMoments& grouped);

}  // namespace hw::oal

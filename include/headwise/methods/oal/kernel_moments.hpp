#pragma once
// The grouped kernel's calibration loss at any query in O(pairs x d), from moments of the keys
// computed once per sequence and grouping. With s = [1, s_1..s_G] (kernel.hpp) and M = L L^T,
// kappa_ij = eps + s^T M s, so the kernel's sums over the keys j <= i are
//   z_i = sum_{a<=b} m_ab Z_i^ab,   z_i y_i = sum_{a<=b} m_ab P_i^ab,
//   Z_i^ab = sum_{j<=i} s_a s_b,    P_i^ab = sum_{j<=i} s_a s_b v_j,
// with m_ab = M_ab (a = b, plus eps at a = b = 0) or 2 M_ab (a < b). A fit evaluates the loss
// at 32 positions per update and at every validation position, six fits per head: the direct
// form (kernel_loss, O(i d) per query) made a T = 4096 calibration of one 14-head layer take
// over 6 minutes on 2 cores; the moments are computed once, chunk by chunk: within a chunk from
// the pair weights s_a s_b, across chunks from running sums of feature products (s_a s_b is a
// dot product of features of q_i and of k_j), O(d^3) per position instead of O(pairs d T).
// loss_moments.hpp folds them with the targets into what the fits read.
#include <cstdint>
#include <vector>

#include "headwise/methods/oal/kernel.hpp"

namespace hw::oal {

struct KernelMoments {
  int T = 0, d = 0, G = 1, pairs = 0;  // pairs = (G+1)(G+2)/2, ordered (0,0), (0,1), .., (G,G)
  std::vector<int32_t> groups;         // [d], 1..G: the grouping these moments are of
  std::vector<double> Z;               // [T][pairs]
  std::vector<double> P;               // [T][pairs][d]
};

// Call with the BLAS library single-threaded when inside an OpenMP team (blas::SingleThreaded).
// `chunk`: positions per chunk (the default balances the chunk's own pair products against the
// running sums' at d = 64; tests pass small ones to cross many chunk boundaries).
KernelMoments kernel_moments(const HeadRows& h, const std::vector<int32_t>& groups, int G, int chunk = 64);

// softmax_output at every query: out [T][d].
void softmax_outputs(const HeadRows& h, double* out);

}  // namespace hw::oal

#pragma once
// Steps of kernel_loss (pair by pair, kernel.cpp): one query's normalised output against its
// target, and the gradient's last step dL = 2 A L, which moments_loss (loss_moments.cpp) shares.
#include <cmath>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"

namespace hw::oal::detail {

// y /= z (the kernel's denominator, which must be positive and finite); returns
// norm * sum_r (y_r - t_r)^2 and sets g = its gradient with respect to y.
inline double query_error(double* y, double z, const double* target, int d, double norm, double* g, int query) {
  check(z > 0.0 && std::isfinite(z), "OAL kernel: non-positive or non-finite denominator at query " + std::to_string(query));
  double loss = 0.0;
  for (int r = 0; r < d; ++r) {
    y[r] /= z;
    const double e = y[r] - target[r];
    loss += e * e * norm;
    g[r] = 2.0 * e * norm;
  }
  return loss;
}

// dL += 2 A L on the lower triangle, A = sum_j c_j s_j s_j^T ((G+1)^2, symmetric) and L lower
// triangular: d kappa / d L = 2 s s^T L.
inline void add_lower_gradient(const std::vector<double>& A, const std::vector<double>& L, int G1, double* dL) {
  for (int a = 0; a < G1; ++a)
    for (int c = 0; c <= a; ++c) {
      double v = 0.0;
      for (int b = c; b < G1; ++b) v += A[size_t(a * G1 + b)] * L[size_t(b * G1 + c)];
      dL[size_t(a * G1 + c)] += 2.0 * v;
    }
}

}  // namespace hw::oal::detail

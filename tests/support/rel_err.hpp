#pragma once
// The error measure most tests bound: max |got - ref| / max |ref| (max |got - ref| when ref is
// all zero), with the reference in double. A non-finite value in got, or a size mismatch, is
// an infinite error, so a NaN can never pass as "small".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hw::test {

template <class T>
double max_rel_err(const T* got, const double* ref, int64_t n) {
  double scale = 0.0, err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    if (!std::isfinite(g)) return INFINITY;
    scale = std::max(scale, std::fabs(ref[i]));
    err = std::max(err, std::fabs(g - ref[i]));
  }
  return scale > 0.0 ? err / scale : err;
}

template <class T>
double max_rel_err(const std::vector<T>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  return max_rel_err(got.data(), ref.data(), static_cast<int64_t>(ref.size()));
}

}  // namespace hw::test

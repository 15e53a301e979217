#pragma once
// The error measures tests bound, in one place. Every one of them treats a non-finite value (a
// NaN or an infinity) in the result, the reference or the scale as an infinite error, so a NaN
// can never pass as "small". (std::max(err, NaN) returns err: a running maximum written with
// std::max silently skips every NaN; route every comparison through worse() / abs_err().)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hw::test {

// |got - ref|, or infinity when either is not finite.
inline double abs_err(double got, double ref) {
  if (!std::isfinite(got) || !std::isfinite(ref)) return INFINITY;
  return std::fabs(got - ref);
}

// The running maximum of error terms: infinity as soon as any term (or the maximum so far) is
// NaN or infinite.
inline double worse(double so_far, double term) {
  if (std::isnan(so_far) || std::isnan(term)) return INFINITY;
  return std::max(so_far, term);
}

// The largest |value| so far, for scales: a non-finite value makes the scale NaN, and so the
// error divided by it infinite (see ratio()).
inline double bigger_scale(double so_far, double value) {
  if (!std::isfinite(value)) return NAN;
  return std::max(so_far, std::fabs(value));
}

// err / scale, infinite when either is not finite (an all-zero scale returns err itself).
inline double ratio(double err, double scale) {
  if (!std::isfinite(err) || !std::isfinite(scale)) return INFINITY;
  return scale > 0.0 ? err / scale : err;
}

// The measure most tests bound: max |got - ref| / max |ref| (max |got - ref| when ref is all
// zero). A size mismatch is an infinite error too.
template <class T, class R>
double max_rel_err(const T* got, const R* ref, int64_t n) {
  double scale = 0.0, err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    scale = bigger_scale(scale, double(ref[i]));
    err = worse(err, abs_err(double(got[i]), double(ref[i])));
  }
  return ratio(err, scale);
}

template <class T, class R>
double max_rel_err(const std::vector<T>& got, const std::vector<R>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  return max_rel_err(got.data(), ref.data(), static_cast<int64_t>(ref.size()));
}

// max |got - ref| / max(max |ref|, floor): one relative error per tensor, where the floor stands
// for the inputs' scale when the reference is (near) zero.
template <class T, class R>
double max_rel_err_floor(const std::vector<T>& got, const std::vector<R>& ref, double floor) {
  if (got.size() != ref.size()) return INFINITY;
  double scale = floor, err = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = bigger_scale(scale, double(ref[i]));
    err = worse(err, abs_err(double(got[i]), double(ref[i])));
  }
  return ratio(err, scale);
}

// Worst elementwise |got - ref| / max(|ref|, floor).
template <class T, class R>
double max_elem_err(const std::vector<T>& got, const std::vector<R>& ref, double floor = 1.0) {
  if (got.size() != ref.size()) return INFINITY;
  double err = 0.0;
  for (size_t i = 0; i < ref.size(); ++i)
    err = worse(err, ratio(abs_err(double(got[i]), double(ref[i])), std::max(std::fabs(double(ref[i])), floor)));
  return err;
}

}  // namespace hw::test

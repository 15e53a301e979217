#pragma once
// Helpers shared by the kernel tests: random data, central finite differences in double,
// and error measures (built on tests/support/rel_err.hpp, so a NaN or an infinity in either
// operand is an infinite error). The references they compare against are always computed
// independently of the kernel under test.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/core/rng.hpp"
#include "support/rel_err.hpp"

namespace hwtest {

using Vec = std::vector<double>;

inline Vec randn(hw::Rng& rng, size_t n, double scale = 1.0) {
  Vec v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

// Values exactly representable in float, so float and double runs see identical inputs and
// a float-vs-double comparison measures only the kernel's float arithmetic.
inline Vec randn_f(hw::Rng& rng, size_t n, double scale = 1.0) {
  Vec v = randn(rng, n, scale);
  for (auto& x : v) x = static_cast<double>(static_cast<float>(x));
  return v;
}

template <class F>
std::vector<F> cast(const Vec& v) {
  return std::vector<F>(v.begin(), v.end());
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

// d loss / d p[i] for every i by central differences; p is restored afterwards.
inline Vec fd_grad(Vec& p, const std::function<double()>& loss, double h = 1e-6) {
  Vec g(p.size());
  for (size_t i = 0; i < p.size(); i++) {
    const double keep = p[i];
    p[i] = keep + h;
    const double up = loss();
    p[i] = keep - h;
    const double down = loss();
    p[i] = keep;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

// Worst elementwise relative error of an analytic gradient against finite differences.
// The floor keeps gradients that are ~0 from dividing by ~0: finite differences carry an
// absolute rounding error of about 1e-10 * |loss| here.
inline double fd_err(const Vec& analytic, const Vec& fd, double floor = 1e-2) {
  if (analytic.size() != fd.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < fd.size(); i++) {
    const double scale = std::max({std::abs(analytic[i]), std::abs(fd[i]), floor});
    worst = hw::test::worse(worst, hw::test::ratio(hw::test::abs_err(analytic[i], fd[i]), scale));
  }
  return worst;
}

// Analytic gradient as produced by an accumulating backward: buffer minus its prefill.
inline Vec minus(const Vec& a, const Vec& b) {
  Vec d(a.size());
  for (size_t i = 0; i < a.size(); i++) d[i] = a[i] - b[i];
  return d;
}

// Norm-wise relative difference max|a-b| / max|ref|, for float-vs-double agreement.
template <class A>
double rel_diff(const std::vector<A>& a, const Vec& ref) {
  return hw::test::max_rel_err(a, ref);
}

// Worst elementwise |a-b| / max(|b|, 1): forward checks against naive formulas in double.
inline double max_err(const Vec& a, const Vec& ref) { return hw::test::max_elem_err(a, ref, 1.0); }

}  // namespace hwtest

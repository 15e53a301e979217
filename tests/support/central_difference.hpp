#pragma once
// The central finite difference the gradient tests compare analytic gradients against, in one
// place: (f(x + h) - f(x - h)) / 2h in double, with x restored afterwards (the tests perturb a
// parameter or input in place and run the whole forward again).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace hw::test {

// (f() at x + h - f() at x - h) / 2h; x holds its old value again on return.
template <class F>
double central_difference(double& x, F&& f, double h = 1e-5) {
  const double keep = x;
  x = keep + h;
  const double fp = f();
  x = keep - h;
  const double fm = f();
  x = keep;
  return (fp - fm) / (2 * h);
}

// A whole-model gradient entry name[i] against its central difference of loss() (h 1e-5,
// relative 1e-5, absolute 1e-8: double throughout, so only the O(h^2) truncation remains).
// Returns the difference, for checks of its own (a parameter that must reach the loss).
template <class F>
double check_entry_against_fd(const std::string& name, int64_t i, double analytic, double& x, F&& loss) {
  const double fd = central_difference(x, loss);
  INFO(name << "[" << i << "] analytic " << analytic << " fd " << fd);
  CHECK(analytic == Approx(fd).epsilon(1e-5).margin(1e-8));
  return fd;
}

}  // namespace hw::test

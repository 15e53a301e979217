// Ignored targets (kIgnoreTarget) drop out of the loss and the gradient.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "headwise/kernels/cpu.hpp"

TEST_CASE("crossentropy skips ignored targets", "[kernels][crossentropy]") {
  const int64_t N = 5, V = 7;
  std::vector<double> logits(N * V), dlogits(N * V, 99.0), losses(N);
  for (int64_t i = 0; i < N * V; ++i) logits[size_t(i)] = std::sin(0.7 * double(i));
  const int32_t targets[N] = {3, hw::cpu::kIgnoreTarget, 0, hw::cpu::kIgnoreTarget, 6};
  const double total =
      hw::cpu::crossentropy_forward_backward(losses.data(), dlogits.data(), logits.data(), targets, N, V, 0.5);
  double expect = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double z = 0.0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(logits[size_t(n * V + v)]);
    expect += std::log(z) - logits[size_t(n * V + targets[n])];
  }
  CHECK(total == Approx(expect).epsilon(1e-12));
  CHECK(losses[1] == 0.0);
  for (int64_t v = 0; v < V; ++v) {
    CHECK(dlogits[size_t(1 * V + v)] == 0.0);
    CHECK(dlogits[size_t(3 * V + v)] == 0.0);
  }
  CHECK(dlogits[size_t(0 * V + 3)] < 0.0);
  const int32_t bad[1] = {-2};
  CHECK_THROWS(hw::cpu::crossentropy_forward_backward<double>(nullptr, nullptr, logits.data(), bad, 1, V, 1.0));
}

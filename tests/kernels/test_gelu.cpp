#include <catch2/catch.hpp>

#include <numbers>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {
// The textbook tanh form, independent of the kernel's sigmoid rewrite.
double naive_gelu(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
// Inputs spanning both tails (where the kernel's exp saturates) and the curved middle.
Vec spread_inputs(hw::Rng& rng, size_t n) {
  Vec x = randn(rng, n, 2.0);
  const double tails[] = {-30.0, -12.0, -6.5, -3.0, 0.0, 3.0, 6.5, 12.0, 30.0};
  for (size_t i = 0; i < std::size(tails) && i < n; i++) x[i] = tails[i];
  return x;
}
}  // namespace

TEST_CASE("gelu forward matches the tanh formula") {
  hw::Rng rng(21);
  const Vec x = spread_inputs(rng, 200);
  Vec out(x.size());
  hw::cpu::gelu_forward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  Vec ref(x.size());
  for (size_t i = 0; i < x.size(); i++) ref[i] = naive_gelu(x[i]);
  CHECK(max_err(out, ref) < 1e-14);
}

TEST_CASE("gelu backward matches finite differences and accumulates") {
  hw::Rng rng(22);
  Vec x = spread_inputs(rng, 40);
  const Vec R = randn(rng, x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  Vec out(x.size());
  auto loss = [&]() {
    hw::cpu::gelu_forward(out.data(), x.data(), n);
    return dot(out, R);
  };
  const Vec g0 = randn(rng, x.size());
  Vec g = g0;
  hw::cpu::gelu_backward(g.data(), x.data(), R.data(), n);
  CHECK(fd_err(minus(g, g0), fd_grad(x, loss)) < 1e-6);
}

TEST_CASE("gelu float agrees with double") {
  hw::Rng rng(23);
  // Large enough to take the parallel path.
  Vec x = spread_inputs(rng, 40000);
  for (auto& v : x) v = static_cast<double>(static_cast<float>(v));
  const Vec dout = randn_f(rng, x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  Vec out_d(x.size()), g_d(x.size(), 0.0);
  hw::cpu::gelu_forward(out_d.data(), x.data(), n);
  hw::cpu::gelu_backward(g_d.data(), x.data(), dout.data(), n);
  const auto x_f = cast<float>(x), d_f = cast<float>(dout);
  std::vector<float> out_f(x.size()), g_f(x.size(), 0.f);
  hw::cpu::gelu_forward(out_f.data(), x_f.data(), n);
  hw::cpu::gelu_backward(g_f.data(), x_f.data(), d_f.data(), n);
  CHECK(rel_diff(out_f, out_d) < 1e-5);
  CHECK(rel_diff(g_f, g_d) < 1e-5);
  // Elementwise too, where the value is not tiny: the float exp must be accurate everywhere.
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); i++)
    if (std::abs(out_d[i]) > 1e-3)
      worst = hw::test::worse(worst, hw::test::ratio(hw::test::abs_err(out_f[i], out_d[i]), std::abs(out_d[i])));
  CHECK(worst < 1e-5);
}

// The fused pass against its definition, composed of the plain ops (zeroed gelu_backward, then
// matmul_backward's bias gradient): bit for bit in float (parallel path), and FD in double.
TEST_CASE("gelu backward with bias gradient equals the composed ops") {
  hw::Rng rng(24);
  const int64_t N = 300, O = 150;  // O not a multiple of the 64-column block
  std::vector<float> x(size_t(N * O)), dout(size_t(N * O));
  for (auto& v : x) v = static_cast<float>(2.0 * rng.normal());
  for (auto& v : dout) v = static_cast<float>(rng.normal());
  std::vector<float> d_ref(x.size(), 0.0f), b_ref(size_t(O), 0.5f);
  hw::cpu::gelu_backward(d_ref.data(), x.data(), dout.data(), N * O);
  hw::cpu::matmul_backward<float>(nullptr, nullptr, b_ref.data(), d_ref.data(), nullptr, nullptr, N, 0, O);
  std::vector<float> d(x.size(), 7.0f), b(size_t(O), 0.5f);  // stale dinp: must be overwritten
  hw::cpu::gelu_backward_bias(d.data(), b.data(), x.data(), dout.data(), N, O);
  CHECK(d == d_ref);
  CHECK(b == b_ref);
  hw::cpu::gelu_backward_bias<float>(d.data(), nullptr, x.data(), dout.data(), N, O);  // no bias gradient
  CHECK(d == d_ref);

  // Double: dinp is d/dx of sum(gelu(x) * dout), dbias its column sums.
  const int64_t n = 6, o = 5;
  Vec xd = spread_inputs(rng, size_t(n * o));
  const Vec R = randn(rng, xd.size());
  Vec out(xd.size());
  auto loss = [&]() {
    hw::cpu::gelu_forward(out.data(), xd.data(), n * o);
    return dot(out, R);
  };
  const Vec fd = fd_grad(xd, loss);
  Vec g(xd.size(), 3.0), bias(size_t(o), 0.0);
  hw::cpu::gelu_backward_bias(g.data(), bias.data(), xd.data(), R.data(), n, o);
  CHECK(fd_err(g, fd) < 1e-6);
  for (int64_t j = 0; j < o; j++) {
    double s = 0;
    for (int64_t r = 0; r < n; r++) s += fd[size_t(r * o + j)];
    CHECK(std::abs(bias[size_t(j)] - s) < 1e-6);
  }
}

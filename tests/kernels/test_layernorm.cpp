#include <catch2/catch.hpp>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {
constexpr double kEps = 1e-5;
}

TEST_CASE("layernorm forward matches the two-pass formula") {
  hw::Rng rng(11);
  const int64_t N = 4, C = 70;  // C > 64 crosses a column block
  Vec inp = randn(rng, N * C, 3.0);
  for (int64_t i = 0; i < C; i++) inp[i] += 100.0;  // a large offset: variance must not cancel
  const Vec weight = randn(rng, C), bias = randn(rng, C);
  Vec out(N * C), mean(N), rstd(N);
  hw::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C,
                             kEps);
  Vec ref(N * C), ref_mean(N), ref_rstd(N);
  for (int64_t n = 0; n < N; n++) {
    double m = 0.0;
    for (int64_t i = 0; i < C; i++) m += inp[n * C + i];
    m /= C;
    double var = 0.0;
    for (int64_t i = 0; i < C; i++) var += (inp[n * C + i] - m) * (inp[n * C + i] - m);
    var /= C;  // biased, as PyTorch
    ref_mean[n] = m;
    ref_rstd[n] = 1.0 / std::sqrt(var + kEps);
    for (int64_t i = 0; i < C; i++) ref[n * C + i] = (inp[n * C + i] - m) * ref_rstd[n] * weight[i] + bias[i];
  }
  CHECK(max_err(out, ref) < 1e-12);
  CHECK(max_err(mean, ref_mean) < 1e-13);
  CHECK(max_err(rstd, ref_rstd) < 1e-13);

  // Statistics are optional when no backward follows.
  Vec out2(N * C);
  hw::cpu::layernorm_forward<double>(out2.data(), nullptr, nullptr, inp.data(), weight.data(), bias.data(), N, C,
                                     kEps);
  CHECK(out2 == out);
}

TEST_CASE("layernorm backward matches finite differences and accumulates") {
  hw::Rng rng(12);
  const int64_t N = 3, C = 70;
  Vec inp = randn(rng, N * C), weight = randn(rng, C), bias = randn(rng, C);
  const Vec R = randn(rng, N * C);
  Vec out(N * C), mean(N), rstd(N);
  auto loss = [&]() {
    hw::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C,
                               kEps);
    return dot(out, R);
  };
  loss();  // saves mean/rstd for the backward
  const Vec gi0 = randn(rng, N * C), gw0 = randn(rng, C), gb0 = randn(rng, C);
  Vec gi = gi0, gw = gw0, gb = gb0;
  hw::cpu::layernorm_backward(gi.data(), gw.data(), gb.data(), R.data(), inp.data(), weight.data(), mean.data(),
                              rstd.data(), N, C);
  CHECK(fd_err(minus(gi, gi0), fd_grad(inp, loss)) < 1e-6);
  CHECK(fd_err(minus(gw, gw0), fd_grad(weight, loss)) < 1e-6);
  CHECK(fd_err(minus(gb, gb0), fd_grad(bias, loss)) < 1e-6);

  // Each gradient can be skipped on its own.
  loss();
  Vec gi_only = gi0, gb_only = gb0;
  hw::cpu::layernorm_backward<double>(gi_only.data(), nullptr, nullptr, R.data(), inp.data(), weight.data(),
                                      mean.data(), rstd.data(), N, C);
  hw::cpu::layernorm_backward<double>(nullptr, nullptr, gb_only.data(), R.data(), inp.data(), weight.data(),
                                      mean.data(), rstd.data(), N, C);
  CHECK(gi_only == gi);
  CHECK(gb_only == gb);
}

TEST_CASE("layernorm float agrees with double") {
  hw::Rng rng(13);
  const int64_t N = 200, C = 96;  // N*C above the OpenMP threshold
  const Vec inp = randn_f(rng, N * C, 2.0), weight = randn_f(rng, C), bias = randn_f(rng, C),
            dout = randn_f(rng, N * C);
  Vec out_d(N * C), m_d(N), r_d(N), gi_d(N * C, 0.0), gw_d(C, 0.0), gb_d(C, 0.0);
  hw::cpu::layernorm_forward(out_d.data(), m_d.data(), r_d.data(), inp.data(), weight.data(), bias.data(), N, C,
                             kEps);
  hw::cpu::layernorm_backward(gi_d.data(), gw_d.data(), gb_d.data(), dout.data(), inp.data(), weight.data(),
                              m_d.data(), r_d.data(), N, C);
  const auto inp_f = cast<float>(inp), w_f = cast<float>(weight), b_f = cast<float>(bias), d_f = cast<float>(dout);
  std::vector<float> out_f(N * C), m_f(N), r_f(N), gi_f(N * C, 0.f), gw_f(C, 0.f), gb_f(C, 0.f);
  hw::cpu::layernorm_forward(out_f.data(), m_f.data(), r_f.data(), inp_f.data(), w_f.data(), b_f.data(), N, C, kEps);
  hw::cpu::layernorm_backward(gi_f.data(), gw_f.data(), gb_f.data(), d_f.data(), inp_f.data(), w_f.data(),
                              m_f.data(), r_f.data(), N, C);
  CHECK(rel_diff(out_f, out_d) < 1e-5);
  CHECK(rel_diff(m_f, m_d) < 1e-5);
  CHECK(rel_diff(r_f, r_d) < 1e-5);
  CHECK(rel_diff(gi_f, gi_d) < 1e-5);
  CHECK(rel_diff(gw_f, gw_d) < 1e-5);
  CHECK(rel_diff(gb_f, gb_d) < 1e-5);
}

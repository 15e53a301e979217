#include <catch2/catch.hpp>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {
// Tokens with repeats, so the backward must sum several rows into one embedding.
std::vector<int32_t> tokens_with_repeats(hw::Rng& rng, int64_t n, int64_t V) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  t[0] = t[n - 1] = t[n / 2] = 1;
  return t;
}
}  // namespace

TEST_CASE("encoder forward matches a naive lookup, with and without wpe") {
  hw::Rng rng(31);
  const int64_t B = 2, T = 3, C = 5, V = 7;
  const auto tok = tokens_with_repeats(rng, B * T, V);
  const Vec wte = randn(rng, V * C), wpe = randn(rng, T * C);
  for (bool with_wpe : {true, false}) {
    Vec out(B * T * C, 9.0);
    hw::cpu::encoder_forward(out.data(), tok.data(), wte.data(), with_wpe ? wpe.data() : nullptr, B, T, C);
    Vec ref(B * T * C);
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++)
          ref[(b * T + t) * C + c] = wte[tok[b * T + t] * C + c] + (with_wpe ? wpe[t * C + c] : 0.0);
    INFO("wpe=" << with_wpe);
    CHECK(out == ref);
  }
}

TEST_CASE("encoder backward matches finite differences and accumulates") {
  hw::Rng rng(32);
  const int64_t B = 2, T = 3, C = 70, V = 4;  // C > 64 crosses a channel block
  const auto tok = tokens_with_repeats(rng, B * T, V);
  Vec wte = randn(rng, V * C), wpe = randn(rng, T * C);
  const Vec R = randn(rng, B * T * C);
  Vec out(B * T * C);
  auto loss = [&]() {
    hw::cpu::encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, R);
  };
  const Vec ge0 = randn(rng, V * C), gp0 = randn(rng, T * C);
  Vec ge = ge0, gp = gp0;
  hw::cpu::encoder_backward(ge.data(), gp.data(), R.data(), tok.data(), B, T, C);
  CHECK(fd_err(minus(ge, ge0), fd_grad(wte, loss)) < 1e-6);
  CHECK(fd_err(minus(gp, gp0), fd_grad(wpe, loss)) < 1e-6);

  Vec ge_only = ge0;
  hw::cpu::encoder_backward<double>(ge_only.data(), nullptr, R.data(), tok.data(), B, T, C);
  CHECK(ge_only == ge);
}

TEST_CASE("encoder float agrees with double") {
  hw::Rng rng(33);
  const int64_t B = 4, T = 64, C = 96, V = 10;  // B*T*C above the OpenMP threshold
  const auto tok = tokens_with_repeats(rng, B * T, V);
  const Vec wte = randn_f(rng, V * C), wpe = randn_f(rng, T * C), dout = randn_f(rng, B * T * C);
  Vec out_d(B * T * C), ge_d(V * C, 0.0), gp_d(T * C, 0.0);
  hw::cpu::encoder_forward(out_d.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  hw::cpu::encoder_backward(ge_d.data(), gp_d.data(), dout.data(), tok.data(), B, T, C);
  const auto wte_f = cast<float>(wte), wpe_f = cast<float>(wpe), d_f = cast<float>(dout);
  std::vector<float> out_f(B * T * C), ge_f(V * C, 0.f), gp_f(T * C, 0.f);
  hw::cpu::encoder_forward(out_f.data(), tok.data(), wte_f.data(), wpe_f.data(), B, T, C);
  hw::cpu::encoder_backward(ge_f.data(), gp_f.data(), d_f.data(), tok.data(), B, T, C);
  CHECK(rel_diff(out_f, out_d) < 1e-5);
  CHECK(rel_diff(ge_f, ge_d) < 1e-5);
  CHECK(rel_diff(gp_f, gp_d) < 1e-5);
}

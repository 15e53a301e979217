// GPU tests of op launchers the Backend interface does not reach (or reaches only through
// defaults): the fused residual + LayerNorm, the bias column sum, AdamW with a stochastically
// rounded bf16 copy, the encoder backward's bit-exactness claim and cross-entropy's NaN for a
// bad target. References: the CPU ops and the host rounding function.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_test_util.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/tiles/bf16_stochastic.hpp"
#include "kernels/cuda/launch_ops.hpp"

namespace {

// Launchers run on the legacy default stream here, which the blocking device copies follow.
constexpr cudaStream_t kStream = nullptr;

using hw::cudatest::DeviceArray;

template <class T>
std::unique_ptr<DeviceArray<T>> to_device(const std::vector<T>& host) {
  auto d = std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()));
  if (!host.empty()) hw::device::copy_to_device(d->get(), host.data(), d->bytes());
  return d;
}
template <class T>
std::unique_ptr<DeviceArray<T>> zeros(int64_t n) {
  return to_device(std::vector<T>(static_cast<size_t>(n)));
}
template <class T>
std::vector<T> to_host(const DeviceArray<T>& d) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<T> host(static_cast<size_t>(d.size()));
  if (!host.empty()) hw::device::copy_to_host(host.data(), d.get(), d.bytes());
  return host;
}

// max |got - ref| / max |ref|; infinite when either side has a NaN or an infinity, or the sizes
// differ (tests/support/rel_err.hpp).
template <class R>
double max_rel_err(const std::vector<float>& got, const std::vector<R>& ref) {
  return hw::test::max_rel_err(got, ref);
}

std::vector<float> randn(hw::Rng& rng, size_t n, double scale = 1.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda ops: fused residual + LayerNorm equals CPU residual then LayerNorm") {
  hw::Rng rng(1201);
  for (int64_t C : {768, 67}) {  // float4 rows and scalar rows
    for (bool alias : {false, true}) {
      const int64_t N = 37;
      const double eps = 1e-5;
      const auto a = randn(rng, N * C), b = randn(rng, N * C, 0.5);
      const auto w = randn(rng, C), bias = randn(rng, C);
      std::vector<float> resid(N * C), ln(N * C), mean(N), rstd(N);
      hw::cpu::residual_forward(resid.data(), a.data(), b.data(), N * C);
      hw::cpu::layernorm_forward(ln.data(), mean.data(), rstd.data(), resid.data(), w.data(), bias.data(), N, C, eps);

      auto da = to_device(a), db = to_device(b), dw = to_device(w), dbias = to_device(bias);
      auto dresid = zeros<float>(N * C), dln = zeros<float>(N * C), dmean = zeros<float>(N),
           drstd = zeros<float>(N);
      DeviceArray<float>& resid_out = alias ? *da : *dresid;  // resid_out may alias a
      hw::cuda::launch_residual_layernorm_forward(kStream, resid_out.get(), dln->get(), dmean->get(), drstd->get(),
                                                  da->get(), db->get(), dw->get(), dbias->get(), N, C, eps);
      INFO("C=" << C << " alias=" << alias);
      CHECK(same_bits(to_host(resid_out), resid));  // a + b is exact on both sides
      CHECK(max_rel_err(to_host(*dln), ln) <= 1e-5);
      CHECK(max_rel_err(to_host(*dmean), mean) <= 1e-5);
      CHECK(max_rel_err(to_host(*drstd), rstd) <= 1e-5);
    }
  }
}

TEST_CASE("cuda ops: bias column sum accumulates column sums deterministically") {
  hw::Rng rng(1202);
  for (int64_t O : {77, 1024}) {
    const int64_t N = 1000;
    const auto dout = randn(rng, N * O), dbias0 = randn(rng, O);
    std::vector<double> ref(O);
    for (int64_t o = 0; o < O; o++) {
      double s = 0.0;
      for (int64_t n = 0; n < N; n++) s += dout[n * O + o];
      ref[o] = dbias0[o] + s;
    }
    auto ddout = to_device(dout), d1 = to_device(dbias0), d2 = to_device(dbias0);
    hw::cuda::launch_bias_column_sum(kStream, d1->get(), ddout->get(), N, O);
    hw::cuda::launch_bias_column_sum(kStream, d2->get(), ddout->get(), N, O);
    INFO("O=" << O);
    CHECK(max_rel_err(to_host(*d1), ref) <= 1e-5);
    CHECK(same_bits(to_host(*d1), to_host(*d2)));
  }
}

TEST_CASE("cuda ops: AdamW with bf16 stochastic rounding") {
  hw::Rng rng(1203);
  hw::AdamWStep s;
  s.decay = 1.0f - 6e-4f * 0.1f;
  s.bc2_sqrt = 0.2f;
  s.step_size = 6e-4f / 0.3f;
  for (size_t offset : {size_t{0}, size_t{1}}) {  // float4 path, then misaligned scalar path
    const size_t n = 100003;
    const auto p = randn(rng, n + offset), g = randn(rng, n + offset, 0.01);
    auto m = randn(rng, n + offset, 0.01), v = randn(rng, n + offset, 1e-3);
    for (auto& x : v) x = x * x;
    std::vector<float> pc = p, mc = m, vc = v;
    hw::cpu::adamw_update(pc.data() + offset, g.data() + offset, mc.data() + offset, vc.data() + offset,
                          static_cast<int64_t>(n), s);

    auto dp = to_device(p), dg = to_device(g), dm = to_device(m), dv = to_device(v);
    auto dp2 = to_device(p), dm2 = to_device(m), dv2 = to_device(v);
    auto dbf = zeros<uint16_t>(static_cast<int64_t>(n));
    const uint32_t seed = 4242;
    hw::cuda::launch_adamw_update_bf16_sr(kStream, dp->get() + offset, reinterpret_cast<__nv_bfloat16*>(dbf->get()),
                                          dg->get() + offset, dm->get() + offset, dv->get() + offset,
                                          static_cast<int64_t>(n), s, seed);
    hw::cuda::launch_adamw_update(kStream, dp2->get() + offset, dg->get() + offset, dm2->get() + offset,
                                  dv2->get() + offset, static_cast<int64_t>(n), s);
    const auto master = to_host(*dp);
    const auto bf = to_host(*dbf);
    INFO("offset=" << offset);
    CHECK(max_rel_err(master, pc) <= 1e-5);
    CHECK(max_rel_err(to_host(*dm), mc) <= 1e-5);
    CHECK(max_rel_err(to_host(*dv), vc) <= 1e-5);
    CHECK(same_bits(to_host(*dp2), master));  // the plain update runs the same element math
    // Every bf16 value is the host rounding of the updated master weight with its element's bits.
    size_t mismatches = 0;
    double bias = 0.0, spread = 0.0;
    for (size_t i = 0; i < n; i++) {
      const float x = master[offset + i];
      const uint16_t want = hw::tiles::bf16_bits_stochastic(x, hw::tiles::rounding_bits(seed, i));
      mismatches += bf[i] != want;
      const double err = static_cast<double>(hw::tiles::bf16_bits_to_float(bf[i])) - x;
      bias += err;
      spread += std::abs(err);
    }
    CHECK(mismatches == 0);
    // Unbiased: the signed errors cancel far better than their magnitudes add (fixed seed).
    CHECK(std::abs(bias) < 0.02 * spread);
  }
}

TEST_CASE("cuda ops: encoder backward is bit-identical to the CPU reference") {
  hw::Rng rng(1204);
  const int64_t B = 4, T = 300, C = 96, V = 50;  // repeated tokens, several token tiles
  std::vector<int32_t> tokens(B * T);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(V));
  const auto dout = randn(rng, B * T * C), dwte0 = randn(rng, V * C), dwpe0 = randn(rng, T * C);
  std::vector<float> dwte = dwte0, dwpe = dwpe0;
  hw::cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
  auto dtok = to_device(tokens);
  auto ddout = to_device(dout), ddwte = to_device(dwte0), ddwpe = to_device(dwpe0);
  hw::cuda::launch_encoder_backward(kStream, ddwte->get(), ddwpe->get(), ddout->get(), dtok->get(), B, T, C);
  CHECK(same_bits(to_host(*ddwte), dwte));
  CHECK(same_bits(to_host(*ddwpe), dwpe));
}

TEST_CASE("cuda ops: cross-entropy in place, with ignored rows and a bad target") {
  hw::Rng rng(1205);
  for (int64_t V : {301, 512}) {  // scalar rows, float4 rows
    INFO("V=" << V);
    const int64_t N = 9;
    const auto logits = randn(rng, N * V, 3.0);
    std::vector<int32_t> targets(N);
    for (auto& t : targets) t = static_cast<int32_t>(rng.below(V));
    targets[2] = hw::cpu::kIgnoreTarget;
    const double dloss = 1.0 / 8.0;
    std::vector<float> losses(N), dlogits(N * V);
    const double total = hw::cpu::crossentropy_forward_backward(losses.data(), dlogits.data(), logits.data(),
                                                                targets.data(), N, V, dloss);

    auto dlog = to_device(logits), dlosses = zeros<float>(N);
    auto dtargets = to_device(targets);
    auto partials = zeros<double>(hw::cuda::kReductionPartials), result = zeros<double>(1);
    const hw::cuda::ReductionScratch scratch{partials->get(), result->get()};
    // dlogits aliases logits (in place, as the model runs it).
    hw::cuda::launch_crossentropy_forward_backward(kStream, dlosses->get(), dlog->get(), dlog->get(),
                                                   dtargets->get(), N, V, dloss, scratch);
    CHECK(std::abs(to_host(*result)[0] - total) <= 1e-5 * std::abs(total));
    CHECK(max_rel_err(to_host(*dlosses), losses) <= 1e-5);
    CHECK(max_rel_err(to_host(*dlog), dlogits) <= 1e-5);

    // A target outside the vocabulary (the CPU op throws) makes that row's loss and the total NaN.
    targets[4] = static_cast<int32_t>(V);
    auto dlog2 = to_device(logits), dl2 = zeros<float>(N * V);
    auto dtargets2 = to_device(targets);
    hw::cuda::launch_crossentropy_forward_backward(kStream, dlosses->get(), dl2->get(), dlog2->get(),
                                                   dtargets2->get(), N, V, dloss, scratch);
    CHECK(std::isnan(to_host(*result)[0]));
    CHECK(std::isnan(to_host(*dlosses)[4]));
    CHECK(std::isnan(to_host(*dl2)[4 * V]));
  }
}

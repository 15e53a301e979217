#include <catch2/catch.hpp>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {
// loss = -log_softmax(row)[target], by the textbook formula (shifted by the max so that
// large logits stay finite in the reference too).
double naive_loss(const double* row, int64_t V, int32_t target) {
  double mx = row[0];
  for (int64_t v = 1; v < V; v++) mx = std::max(mx, row[v]);
  double s = 0.0;
  for (int64_t v = 0; v < V; v++) s += std::exp(row[v] - mx);
  return -(row[target] - mx - std::log(s));
}
std::vector<int32_t> random_targets(hw::Rng& rng, int64_t N, int64_t V) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  return t;
}
}  // namespace

TEST_CASE("crossentropy losses match a naive log-softmax, also for huge logits") {
  hw::Rng rng(51);
  const int64_t N = 5, V = 37;
  Vec logits = randn(rng, N * V, 3.0);
  for (int64_t v = 0; v < V; v++) logits[2 * V + v] += 1000.0;  // exp would overflow unshifted
  const auto tgt = random_targets(rng, N, V);
  Vec losses(N);
  const double total =
      hw::cpu::crossentropy_forward_backward<double>(losses.data(), nullptr, logits.data(), tgt.data(), N, V, 1.0);
  double ref_total = 0.0;
  for (int64_t n = 0; n < N; n++) {
    const double ref = naive_loss(&logits[n * V], V, tgt[n]);
    CHECK(std::abs(losses[n] - ref) < 1e-12 * std::max(1.0, std::abs(ref)));
    ref_total += ref;
  }
  CHECK(std::abs(total - ref_total) < 1e-12 * std::abs(ref_total));
  // Without a losses buffer the total is the same.
  CHECK(hw::cpu::crossentropy_forward_backward<double>(nullptr, nullptr, logits.data(), tgt.data(), N, V, 1.0) ==
        total);
}

TEST_CASE("crossentropy gradient matches finite differences, overwrites, and may alias logits") {
  hw::Rng rng(52);
  const int64_t N = 4, V = 23;
  const double dloss = 0.37;
  Vec logits = randn(rng, N * V, 2.0);
  const auto tgt = random_targets(rng, N, V);
  auto loss = [&]() {
    return dloss * hw::cpu::crossentropy_forward_backward<double>(nullptr, nullptr, logits.data(), tgt.data(), N, V,
                                                                  1.0);
  };
  Vec dlogits = randn(rng, N * V);  // stale contents must be overwritten, not added to
  Vec losses(N);
  const double total =
      hw::cpu::crossentropy_forward_backward(losses.data(), dlogits.data(), logits.data(), tgt.data(), N, V, dloss);
  CHECK(fd_err(dlogits, fd_grad(logits, loss)) < 1e-6);

  // In place: the gradient replaces the logits, with the same losses and gradient (up to the
  // last bits, since vectorized sums may split differently on differently aligned buffers).
  Vec inplace = logits, losses2(N);
  const double total2 =
      hw::cpu::crossentropy_forward_backward(losses2.data(), inplace.data(), inplace.data(), tgt.data(), N, V, dloss);
  CHECK(std::abs(total2 - total) < 1e-14 * std::abs(total));
  CHECK(max_err(losses2, losses) < 1e-14);
  CHECK(max_err(inplace, dlogits) < 1e-14);
}

TEST_CASE("crossentropy rejects a target outside the vocabulary") {
  const int64_t N = 3, V = 4;
  const Vec logits(N * V, 0.0);
  const std::vector<int32_t> bad_high = {0, 4, 1}, bad_low = {0, 1, -2};
  Vec losses(N);
  REQUIRE_THROWS_AS(hw::cpu::crossentropy_forward_backward<double>(losses.data(), nullptr, logits.data(),
                                                                   bad_high.data(), N, V, 1.0),
                    hw::Error);
  REQUIRE_THROWS_WITH(hw::cpu::crossentropy_forward_backward<double>(losses.data(), nullptr, logits.data(),
                                                                     bad_high.data(), N, V, 1.0),
                      Catch::Contains("token 4") && Catch::Contains("position 1"));
  REQUIRE_THROWS_WITH(hw::cpu::crossentropy_forward_backward<double>(losses.data(), nullptr, logits.data(),
                                                                     bad_low.data(), N, V, 1.0),
                      Catch::Contains("token -2") && Catch::Contains("position 2"));
}

TEST_CASE("crossentropy float agrees with double") {
  hw::Rng rng(53);
  // More rows than one stack group, and a vocabulary large enough to stress the sums.
  const int64_t N = 300, V = 1001;
  const Vec logits = randn_f(rng, N * V, 4.0);
  const auto tgt = random_targets(rng, N, V);
  const double dloss = 1.0 / static_cast<double>(N);
  Vec losses_d(N), dl_d(N * V);
  const double total_d =
      hw::cpu::crossentropy_forward_backward(losses_d.data(), dl_d.data(), logits.data(), tgt.data(), N, V, dloss);
  const auto logits_f = cast<float>(logits);
  std::vector<float> losses_f(N), dl_f(N * V);
  const double total_f = hw::cpu::crossentropy_forward_backward(losses_f.data(), dl_f.data(), logits_f.data(),
                                                                tgt.data(), N, V, dloss);
  CHECK(std::abs(total_f - total_d) < 1e-5 * std::abs(total_d));
  CHECK(rel_diff(losses_f, losses_d) < 1e-5);
  CHECK(rel_diff(dl_f, dl_d) < 1e-5);
}

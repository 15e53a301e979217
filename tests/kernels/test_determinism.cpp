#include <catch2/catch.hpp>
#include <omp.h>

#include <functional>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

// The kernels promise results independent of the OpenMP thread count (every reduction has a
// fixed order). Each float op runs with 1, 2 and 3 threads on sizes above the parallel
// threshold; the outputs must be bitwise identical. (The gemm itself is OpenBLAS's; only our
// own reductions are checked.)
namespace {

// Arrays and scalars an op produced; compared with ==, i.e. bitwise for finite values.
struct Outputs {
  std::vector<std::vector<float>> arrays;
  std::vector<double> scalars;
  bool operator==(const Outputs&) const = default;
};

Outputs run_with_threads(int threads, const std::function<Outputs()>& op) {
  const int keep = omp_get_max_threads();
  omp_set_num_threads(threads);
  Outputs out = op();
  omp_set_num_threads(keep);
  return out;
}

void check_thread_independent(const std::function<Outputs()>& op) {
  const Outputs one = run_with_threads(1, op);
  CHECK(run_with_threads(2, op) == one);
  CHECK(run_with_threads(3, op) == one);
}

}  // namespace

TEST_CASE("kernel reductions do not depend on the thread count") {
  hw::Rng rng(71);
  const int64_t N = 300, C = 96, V = 500;
  const auto x = cast<float>(randn(rng, N * C)), dy = cast<float>(randn(rng, N * C));
  const auto w = cast<float>(randn(rng, C)), b = cast<float>(randn(rng, C));
  std::vector<int32_t> tok(N);
  for (auto& t : tok) t = static_cast<int32_t>(rng.below(7));

  SECTION("matmul bias gradient") {
    check_thread_independent([&] {
      std::vector<float> db(C, 0.5f);
      hw::cpu::matmul_backward<float>(nullptr, nullptr, db.data(), dy.data(), x.data(), nullptr, N, C, C);
      return Outputs{{db}, {}};
    });
  }
  SECTION("layernorm forward and backward") {
    check_thread_independent([&] {
      std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.f), dw(C, 0.f), db(C, 0.f);
      hw::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5);
      hw::cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), N, C);
      return Outputs{{out, mean, rstd, dx, dw, db}, {}};
    });
  }
  SECTION("encoder backward with repeated tokens") {
    check_thread_independent([&] {
      std::vector<float> dwte(7 * C, 0.f), dwpe(30 * C, 0.f);
      hw::cpu::encoder_backward(dwte.data(), dwpe.data(), dy.data(), tok.data(), N / 30, 30, C);
      return Outputs{{dwte, dwpe}, {}};
    });
  }
  SECTION("crossentropy losses, total and gradient") {
    const auto logits = cast<float>(randn(rng, N * V, 3.0));
    std::vector<int32_t> tgt(N);
    for (auto& t : tgt) t = static_cast<int32_t>(rng.below(V));
    check_thread_independent([&] {
      std::vector<float> losses(N), dl(N * V);
      const double total = hw::cpu::crossentropy_forward_backward(losses.data(), dl.data(), logits.data(),
                                                                  tgt.data(), N, V, 1.0 / N);
      return Outputs{{losses, dl}, {total}};
    });
  }
  SECTION("sum of squares") {
    const auto big = cast<float>(randn(rng, 5 * (1 << 14) + 3));
    check_thread_independent([&] {
      return Outputs{{}, {hw::cpu::sum_squares(big.data(), static_cast<int64_t>(big.size()))}};
    });
  }
}

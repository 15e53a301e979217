#include <catch2/catch.hpp>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {
constexpr double kTheta = 10000.0;

// A qkv-like buffer: rows of 3*C, rotating the k block (col0 = C) so that the stride and the
// offset both matter.
struct Layout {
  int64_t B, T, n_heads, hd;
  int64_t C() const { return n_heads * hd; }
  int64_t stride() const { return 3 * C(); }
  int64_t col0() const { return C(); }
  int64_t size() const { return B * T * stride(); }
};

// Rotate each pair (x[i], x[i+hd/2]) explicitly, one pair at a time.
Vec naive_rope(const Vec& x, const Layout& L) {
  Vec y = x;
  const int64_t half = L.hd / 2;
  for (int64_t b = 0; b < L.B; b++)
    for (int64_t t = 0; t < L.T; t++)
      for (int64_t h = 0; h < L.n_heads; h++)
        for (int64_t i = 0; i < half; i++) {
          const double angle = static_cast<double>(t) * std::pow(kTheta, -2.0 * static_cast<double>(i) / L.hd);
          const int64_t p = (b * L.T + t) * L.stride() + L.col0() + h * L.hd + i;
          const double x1 = x[p], x2 = x[p + half];
          y[p] = x1 * std::cos(angle) - x2 * std::sin(angle);
          y[p + half] = x1 * std::sin(angle) + x2 * std::cos(angle);
        }
  return y;
}

template <class F>
void fwd(std::vector<F>& x, const Layout& L) {
  hw::cpu::rope_forward(x.data(), L.B, L.T, L.stride(), L.col0(), L.n_heads, L.hd, kTheta);
}
template <class F>
void bwd(std::vector<F>& x, const Layout& L) {
  hw::cpu::rope_backward(x.data(), L.B, L.T, L.stride(), L.col0(), L.n_heads, L.hd, kTheta);
}
}  // namespace

TEST_CASE("rope forward matches an explicit rotation per pair") {
  hw::Rng rng(61);
  // hd = 136 has 68 pairs, more than one cos/sin block.
  for (const Layout L : {Layout{2, 5, 2, 8}, Layout{1, 3, 1, 136}}) {
    const Vec x0 = randn(rng, L.size());
    Vec x = x0;
    fwd(x, L);
    INFO("hd=" << L.hd);
    CHECK(max_err(x, naive_rope(x0, L)) < 1e-13);  // also: columns outside the k block untouched
  }
}

TEST_CASE("rope preserves head norms and backward undoes forward") {
  hw::Rng rng(62);
  const Layout L{2, 7, 3, 6};
  const Vec x0 = randn(rng, L.size());
  Vec x = x0;
  fwd(x, L);
  for (int64_t r = 0; r < L.B * L.T; r++)
    for (int64_t h = 0; h < L.n_heads; h++) {
      double n0 = 0.0, n1 = 0.0;
      for (int64_t i = 0; i < L.hd; i++) {
        const int64_t p = r * L.stride() + L.col0() + h * L.hd + i;
        n0 += x0[p] * x0[p];
        n1 += x[p] * x[p];
      }
      REQUIRE(std::abs(n1 - n0) < 1e-13 * n0);
    }
  bwd(x, L);
  CHECK(max_err(x, x0) < 1e-14);
}

TEST_CASE("rope backward matches finite differences") {
  hw::Rng rng(63);
  const Layout L{2, 4, 2, 6};
  Vec x = randn(rng, L.size());
  const Vec R = randn(rng, L.size());
  Vec y;
  auto loss = [&]() {
    y = x;
    fwd(y, L);
    return dot(y, R);
  };
  Vec g = R;  // backward transforms the incoming gradient in place
  bwd(g, L);
  CHECK(fd_err(g, fd_grad(x, loss)) < 1e-6);
}

TEST_CASE("rope rejects an odd head width and a non-positive theta") {
  Vec x(2 * 5, 1.0);
  REQUIRE_THROWS_AS(hw::cpu::rope_forward(x.data(), 1, 2, 5, 0, 1, 5, kTheta), hw::Error);
  REQUIRE_THROWS_WITH(hw::cpu::rope_backward(x.data(), 1, 2, 5, 0, 1, 5, kTheta), Catch::Contains("hd=5"));
  REQUIRE_THROWS_WITH(hw::cpu::rope_forward(x.data(), 1, 2, 5, 0, 1, 4, 0.0), Catch::Contains("theta"));
}

TEST_CASE("rope float agrees with double") {
  hw::Rng rng(64);
  const Layout L{2, 80, 4, 32};  // above the OpenMP threshold
  const Vec x0 = randn_f(rng, L.size());
  Vec xd = x0;
  fwd(xd, L);
  auto xf = cast<float>(x0);
  fwd(xf, L);
  CHECK(rel_diff(xf, xd) < 1e-5);
  bwd(xd, L);
  bwd(xf, L);
  CHECK(rel_diff(xf, xd) < 1e-5);
}

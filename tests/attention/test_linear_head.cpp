// Linear (OAL) heads: G = 1 against the kernel written out by hand, the large-eps limit,
// positive denominators, and the errors for bad parameters or non-finite inputs.
#include <catch2/catch.hpp>

#include <cmath>

#include "attention/layer_fixture.hpp"
#include "headwise/core/error.hpp"

namespace {

std::vector<fx::HeadSpec> one_linear() { return {fx::spec("linear")}; }

ref::Layer g1_layer(int64_t T, double eps, unsigned seed) {
  ref::Layer l = fx::make_layer(one_linear(), 1, 6, 1, T, seed, eps);  // head 0 gets G = 1
  REQUIRE(l.G[0] == 1);
  l.L[0] = {0.8, 99.0, -0.6, 1.3};  // [[L00, junk], [L10, L11]]
  return l;
}

}  // namespace

TEST_CASE("linear head with G = 1 matches kappa = eps + (L00 + L10 s)^2 + (L11 s)^2") {
  for (double eps : {1e-6, 5.0}) {
    const int64_t T = 130;
    const ref::Layer l = g1_layer(T, eps, 31u);
    fx::Packed<double> p(l);
    p.forward();
    const double L00 = 0.8, L10 = -0.6, L11 = 1.3;
    for (int64_t i = 0; i < T; ++i) {
      double num[6] = {}, den = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int d = 0; d < 6; ++d) s += l.q[0][0][size_t(i * 6 + d)] * l.k[0][0][size_t(j * 6 + d)];
        s /= std::sqrt(6.0);
        const double kap = eps + (L00 + L10 * s) * (L00 + L10 * s) + (L11 * s) * (L11 * s);
        den += kap;
        for (int d = 0; d < 6; ++d) num[d] += kap * l.v[0][0][size_t(j * 6 + d)];
      }
      INFO("eps " << eps << " row " << i);
      CHECK(p.stats[size_t(i)] == Approx(den).epsilon(1e-12));
      for (int d = 0; d < 6; ++d) CHECK(p.out_at(0, 0, i, d) == Approx(num[d] / den).epsilon(1e-11).margin(1e-12));
    }
  }
}

TEST_CASE("linear head with a huge eps averages the prefix uniformly") {
  const int64_t T = 70;
  const ref::Layer l = g1_layer(T, 1e12, 32u);
  fx::Packed<double> p(l);
  p.forward();
  for (int d = 0; d < 6; ++d) {
    double sum = 0;
    for (int64_t i = 0; i < T; ++i) {
      sum += l.v[0][0][size_t(i * 6 + d)];
      CHECK(p.out_at(0, 0, i, d) == Approx(sum / double(i + 1)).margin(1e-9));
    }
  }
}

TEST_CASE("linear denominators are positive and at least (i+1) eps, also in float") {
  // negative diagonals in L are allowed; kappa >= eps regardless
  ref::Layer l = fx::make_layer({fx::spec("linear"), fx::spec("linear"), fx::spec("linear")}, 1, 8, 2, 130, 33u, 1e-3);
  for (auto& L : l.L) L[0] = -std::abs(L[0]) - 0.5;
  fx::Packed<float> p(l);
  p.forward();
  for (size_t e = 0; e < p.stats.size(); ++e) {
    const int64_t i = int64_t(e) % 130;
    CHECK(p.stats[e] >= float(double(i + 1) * 1e-3 * (1 - 1e-5)));
  }
}

TEST_CASE("linear head: non-finite inputs and bad parameters are hw::Error") {
  const ref::Layer l = fx::make_layer({fx::spec("softmax"), fx::spec("linear")}, 1, 4, 2, 67, 34u);
  {
    fx::Packed<double> p(l);
    p.qkv_at(1, 40, p.layout.q_col(1) + 2) = std::nan("");
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("linear head 1") && Catch::Contains("sequence 1") &&
                                       Catch::Contains("position 40"));
  }
  {
    fx::Packed<float> p(l);
    p.qkv_at(0, 3, p.layout.k_col(0)) = INFINITY;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("denominator") && Catch::Contains("position 3"));
  }
  {
    fx::Packed<double> p(l);
    p.groups[1][2] = 0;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("groups[2] = 0"));
    p.groups[1][2] = l.G[1] + 1;
    CHECK_THROWS_AS(p.forward(), hw::Error);
  }
  {
    fx::Packed<double> p(l);
    p.params.linears[1].n_groups = 5;  // > head_dim 4
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("n_groups 5"));
  }
  {
    fx::Packed<double> p(l);
    p.params.linear_eps = 0.0;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("linear_eps"));
    p.params.linear_eps = 1e-6;
    p.params.linears[1].L = nullptr;
    CHECK_THROWS_AS(p.forward(), hw::Error);
    CHECK_THROWS_AS(p.backward(), hw::Error);
  }
  {
    fx::Packed<double> p(l);
    p.params.linears.resize(1);
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("head 1 is linear but has no parameters"));
  }
}

TEST_CASE("static heads: missing parameters are hw::Error, log-normalisers match a direct sum") {
  const ref::Layer l = fx::make_layer({fx::spec("static"), fx::spec("softmax")}, 2, 4, 1, 7, 35u);
  fx::Packed<double> p(l);
  p.params.statics[0].log_z = nullptr;
  CHECK_THROWS_WITH(p.forward(), Catch::Contains("head 0 is static"));

  // large logits: a naive exp would overflow
  std::vector<double> alpha, rho;
  for (int i = 0; i < 200; ++i) {
    alpha.push_back(300.0 + 0.37 * i - 0.002 * i * i);
    rho.push_back(-0.5 * i + 400.0 * (i % 3 == 0));
  }
  const auto want = ref::static_log_z(alpha, rho, 200);
  std::vector<double> got(200);
  hw::attn::static_log_normalisers(got.data(), alpha.data(), rho.data(), 200);
  std::vector<float> af(alpha.begin(), alpha.end()), rf(rho.begin(), rho.end()), gf(200);
  hw::attn::static_log_normalisers(gf.data(), af.data(), rf.data(), 200);
  for (size_t i = 0; i < 200; ++i) {
    CHECK(got[i] == Approx(want[i]).epsilon(1e-14));
    CHECK(gf[i] == Approx(want[i]).epsilon(1e-6));
  }
}

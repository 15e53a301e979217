// Table 1's subset math for the DiJiang and TaylorShift baselines (approximators.cpp) against
// dense evaluations: a hand-worked single-dimension case (a 1 x 1 DCT makes DiJiang's subset kernel
// the constant 1; TaylorShift's unit 1-vectors give s = +-1), the definitions written out here
// for a three-dimension subset, and, on every dimension, Table 2's dense head evaluation.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/methods/oal/approximators.hpp"
#include "headwise/methods/oal/baselines.hpp"

using namespace hw;

namespace {

struct RandomHead {
  int T = 12, d = 8;
  std::vector<float> q, k, v;
  oal::HeadRows rows;
  explicit RandomHead(uint64_t seed) {
    Rng rng(seed);
    q.resize(size_t(T * d));
    k.resize(q.size());
    v.resize(q.size());
    for (auto& x : q) x = float(1.3 * rng.normal());
    for (auto& x : k) x = float(rng.normal());
    for (auto& x : v) x = float(rng.normal());
    rows = {q.data(), k.data(), v.data(), d, d, d, T, d};
  }
};

const oal::SubsetApprox& approx(const std::string& name) {
  for (const auto& a : oal::subset_approximators())
    if (a.name == name) return a;
  FAIL("no approximation " << name);
  return oal::subset_approximators().front();
}

// Normalised mixed weights of query i.
std::vector<double> normalised(const RandomHead& h, const std::string& name, const std::vector<int>& S, int i) {
  std::vector<double> w(size_t(i + 1));
  oal::mixed_weights(h.rows, approx(name), S, i, 1, 16, w.data());
  double z = 0;
  for (double e : w) z += e;
  for (double& e : w) e /= z;
  return w;
}

// exp(sum over r not in S of q_ir k_jr / sqrt(d)): the exact part.
double exact_rest(const RandomHead& h, const std::vector<int>& S, int i, int j) {
  double s = 0;
  for (int r = 0; r < h.d; ++r) {
    bool in = false;
    for (int e : S) in = in || e == r;
    if (!in) s += double(h.q[size_t(i * h.d + r)]) * h.k[size_t(j * h.d + r)];
  }
  return std::exp(s / std::sqrt(double(h.d)));
}

void check_against(const std::vector<double>& got, std::vector<double> want) {
  double z = 0;
  for (double e : want) z += e;
  REQUIRE(got.size() == want.size());
  for (size_t j = 0; j < got.size(); ++j) CHECK(got[j] == Approx(want[j] / z).epsilon(1e-10));
}

}  // namespace

TEST_CASE("oal Table 1 dijiang and taylorshift on one dimension: the hand-worked kernels", "[oal][approximators]") {
  RandomHead h(3);
  const std::vector<int> S = {5};
  const int i = 10;
  std::vector<double> dij, ts;
  for (int j = 0; j <= i; ++j) {
    const double rest = exact_rest(h, S, i, j);
    dij.push_back(rest);  // softmax of one DCT coefficient is 1: only the exact part is left
    const double sign = double(h.q[size_t(i * h.d + 5)]) * h.k[size_t(j * h.d + 5)] > 0 ? 1.0 : -1.0;
    ts.push_back((sign > 0 ? 2.5 : 0.5) * rest);  // s = +-1 (tau 1): 1 + s + s^2/2
  }
  check_against(normalised(h, "dijiang", S, i), dij);
  check_against(normalised(h, "taylorshift", S, i), ts);
}

TEST_CASE("oal Table 1 dijiang and taylorshift on a subset equal their definitions", "[oal][approximators]") {
  RandomHead h(8);
  const std::vector<int> S = {1, 4, 6};
  const int n = 3, i = 11;
  const double sc = 1.0 / std::pow(double(h.d), 0.25), pi = std::acos(-1.0);
  auto a = [&](const float* x) {  // softmax of the orthonormal 3 x 3 DCT-II of x_S / d^(1/4)
    std::vector<double> z(static_cast<size_t>(n));
    double sum = 0;
    for (int f = 0; f < n; ++f) {
      for (int c = 0; c < n; ++c)
        z[size_t(f)] += std::sqrt((f ? 2.0 : 1.0) / n) * std::cos(pi * (2 * c + 1) * f / (2.0 * n)) * sc * x[S[size_t(c)]];
      sum += (z[size_t(f)] = std::exp(z[size_t(f)]));
    }
    for (double& e : z) e /= sum;
    return z;
  };
  std::vector<double> dij, ts;
  const std::vector<double> aq = a(h.q.data() + i * h.d);
  for (int j = 0; j <= i; ++j) {
    const std::vector<double> ak = a(h.k.data() + j * h.d);
    dij.push_back((aq[0] * ak[0] + aq[1] * ak[1] + aq[2] * ak[2]) * exact_rest(h, S, i, j));
    double qk = 0, qq = 0, kk = 0;
    for (int r : S) {
      const double x = h.q[size_t(i * h.d + r)], y = h.k[size_t(j * h.d + r)];
      qk += x * y;
      qq += x * x;
      kk += y * y;
    }
    const double s = qk / std::sqrt(qq * kk);
    ts.push_back((1 + s + s * s / 2) * exact_rest(h, S, i, j));
  }
  check_against(normalised(h, "dijiang", S, i), dij);
  check_against(normalised(h, "taylorshift", S, i), ts);
}

TEST_CASE("oal Table 1 on every dimension is the baseline head of Table 2", "[oal][approximators]") {
  RandomHead h(11);
  std::vector<int> all;
  for (int r = 0; r < h.d; ++r) all.push_back(r);
  for (const std::string name : {"dijiang", "taylorshift"}) {
    INFO(name);
    const oal::BaselineHead b = oal::baseline_head(oal::parse_kernel(name, "k"), h.d, 1, 1, 0, 0, 1);
    std::vector<double> table2(size_t(h.T * h.d));
    oal::baseline_outputs(h.rows, b, table2.data());
    for (int i : {0, 6, 11}) {
      const std::vector<double> w = normalised(h, name, all, i);
      for (int c = 0; c < h.d; ++c) {
        double y = 0;
        for (int j = 0; j <= i; ++j) y += w[size_t(j)] * h.v[size_t(j * h.d + c)];
        CHECK(y == Approx(table2[size_t(i * h.d + c)]).epsilon(1e-10).margin(1e-12));
      }
    }
  }
}

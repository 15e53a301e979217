// CPU tests of the per-element and per-row math the CUDA op kernels share with the host
// (tiles/pointwise_math.hpp, tiles/crossentropy_stat.hpp, tiles/rope_angle.hpp), against
// independent double formulas and the CPU reference ops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/tiles/crossentropy_stat.hpp"
#include "headwise/kernels/tiles/pointwise_math.hpp"
#include "headwise/kernels/tiles/rope_angle.hpp"

using namespace hw::tiles;

namespace {

double tanh_gelu(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

// Relative error with a floor of 1 for values near zero.
double rel(double a, double ref) { return std::abs(a - ref) / std::max(std::abs(ref), 1.0); }

std::vector<float> spread(hw::Rng& rng, size_t n, double scale) {
  std::vector<float> v;
  for (size_t i = 0; i < n; i++) v.push_back(static_cast<float>(scale * rng.normal()));
  for (float t : {-30.0f, -12.0f, -6.5f, -3.0f, -0.75f, 0.0f, 3.0f, 6.5f, 12.0f, 30.0f}) v.push_back(t);
  return v;
}

}  // namespace

TEST_CASE("cuda tiling: gelu value and slope match the tanh formula in double") {
  hw::Rng rng(911);
  for (float x : spread(rng, 500, 2.0)) {
    INFO("x=" << x);
    CHECK(rel(gelu_value(x), tanh_gelu(x)) < 2e-6);
    const double h = 1e-5, xd = x;
    const double fd = (tanh_gelu(xd + h) - tanh_gelu(xd - h)) / (2 * h);
    CHECK(rel(gelu_slope(x), fd) < 2e-6);
  }
  CHECK(std::isnan(gelu_value(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("cuda tiling: gelu element math agrees with the CPU ops") {
  hw::Rng rng(912);
  const std::vector<float> x = spread(rng, 300, 3.0);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> out(x.size()), dinp(x.size(), 0.5f), dout(x.size());
  for (auto& d : dout) d = static_cast<float>(rng.normal());
  hw::cpu::gelu_forward(out.data(), x.data(), n);
  std::vector<float> dref = dinp;
  hw::cpu::gelu_backward(dref.data(), x.data(), dout.data(), n);
  for (size_t i = 0; i < x.size(); i++) {
    INFO("x=" << x[i]);
    CHECK(rel(gelu_value(x[i]), out[i]) < 1e-6);
    CHECK(rel(0.5f + dout[i] * gelu_slope(x[i]), dref[i]) < 1e-6);
  }
}

TEST_CASE("cuda tiling: AdamW element matches the update formula in double and the CPU op") {
  hw::Rng rng(913);
  hw::AdamWStep s;
  s.decay = 1.0f - 3e-4f * 0.1f;
  s.beta1 = 0.9f;
  s.beta2 = 0.95f;
  s.eps = 1e-8f;
  s.bc2_sqrt = 0.3f;
  s.step_size = 3e-4f / 0.4f;
  const int64_t n = 257;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; i++) {
    p[i] = static_cast<float>(rng.normal());
    g[i] = static_cast<float>(rng.normal() * 0.01);
    m[i] = static_cast<float>(rng.normal() * 0.01);
    v[i] = static_cast<float>(rng.uniform() * 1e-4);
  }
  std::vector<float> pc = p, mc = m, vc = v;
  hw::cpu::adamw_update(pc.data(), g.data(), mc.data(), vc.data(), n, s);
  for (int64_t i = 0; i < n; i++) {
    float pe = p[i], me = m[i], ve = v[i];
    adamw_element(pe, g[i], me, ve, s);
    // Independent double evaluation of the documented formula (with the same float
    // coefficients). m may cancel (0.9 m close to -0.1 g): its error is judged against the
    // size of its terms.
    const double b1 = s.beta1, b2 = s.beta2;
    const double md = b1 * m[i] + (1 - b1) * g[i];
    const double m_scale = b1 * std::abs(m[i]) + (1 - b1) * std::abs(g[i]);
    const double vd = b2 * v[i] + (1 - b2) * static_cast<double>(g[i]) * g[i];
    const double pd = static_cast<double>(p[i]) * s.decay -
                      static_cast<double>(s.step_size) * md / (std::sqrt(vd) / s.bc2_sqrt + s.eps);
    const double p_scale = std::abs(static_cast<double>(p[i])) + std::abs(s.step_size * m_scale /
                                                                            (std::sqrt(vd) / s.bc2_sqrt + s.eps));
    INFO("i=" << i);
    CHECK(std::abs(me - md) <= 1e-6 * m_scale);
    CHECK(std::abs(ve - vd) <= 1e-6 * vd);
    CHECK(std::abs(pe - pd) <= 1e-6 * p_scale);
    CHECK(std::abs(pe - pc[i]) <= 1e-6 * p_scale);
    CHECK(std::abs(me - mc[i]) <= 1e-6 * m_scale);
    CHECK(std::abs(ve - vc[i]) <= 1e-6 * vc[i]);
  }
}

namespace {

// Statistics of x[lo, hi) pushed in order.
SoftmaxStat pushed(const std::vector<float>& x, size_t lo, size_t hi) {
  SoftmaxStat s = softmax_stat_empty();
  for (size_t i = lo; i < hi; i++) softmax_stat_push(s, x[i]);
  return s;
}

// Split [lo, hi) at random points and merge the halves recursively (a random merge tree).
SoftmaxStat tree(hw::Rng& rng, const std::vector<float>& x, size_t lo, size_t hi) {
  if (hi - lo <= 3) return pushed(x, lo, hi);
  const size_t mid = lo + 1 + rng.below(hi - lo - 1);
  return softmax_stat_merge(tree(rng, x, lo, mid), tree(rng, x, mid, hi));
}

}  // namespace

TEST_CASE("cuda tiling: softmax statistics from any merge tree match the direct max and sum") {
  hw::Rng rng(914);
  for (int trial = 0; trial < 20; trial++) {
    std::vector<float> x(1 + rng.below(3000));
    for (auto& v : x) v = static_cast<float>(4.0 * rng.normal());
    if (trial % 3 == 0)  // masked logits
      for (size_t i = 0; i < x.size(); i += 5) x[i] = -std::numeric_limits<float>::infinity();
    if (trial % 3 == 0) x[x.size() / 2] = 1.0f;  // at least one finite logit
    const float mx = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float v : x) sum += std::exp(static_cast<double>(v) - mx);
    const SoftmaxStat s = tree(rng, x, 0, x.size());
    INFO("trial=" << trial << " n=" << x.size());
    CHECK(s.max == mx);
    CHECK(std::abs(s.sum - sum) <= 1e-6 * sum);
  }
}

TEST_CASE("cuda tiling: softmax statistics of empty and degenerate rows") {
  const float inf = std::numeric_limits<float>::infinity();
  SoftmaxStat e = softmax_stat_merge(softmax_stat_empty(), softmax_stat_empty());
  CHECK(e.sum == 0.0);
  CHECK(e.max == -inf);
  SoftmaxStat masked = softmax_stat_empty();
  softmax_stat_push(masked, -inf);
  CHECK(masked.sum == 0.0);  // not NaN: a masked logit adds nothing
  SoftmaxStat one = softmax_stat_empty();
  softmax_stat_push(one, 2.0f);
  const SoftmaxStat m = softmax_stat_merge(masked, one);
  CHECK(m.max == 2.0f);
  CHECK(m.sum == 1.0);
  SoftmaxStat bad = one;
  softmax_stat_push(bad, std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(softmax_stat_merge(bad, one).sum));
}

TEST_CASE("cuda tiling: rope angles and pair offsets reproduce the CPU op bit for bit") {
  // Rotating with rope_cos_sin at rope_pair_offset must give exactly what cpu::rope_* gives,
  // for a row layout with a column offset and a stride wider than the heads.
  hw::Rng rng(915);
  const int64_t B = 2, T = 37, n_heads = 3, hd = 10, col0 = 4, row_stride = col0 + n_heads * hd + 3;
  for (double dir : {1.0, -1.0}) {
    for (double theta : {10000.0, 500000.0, 7.5}) {
      std::vector<float> x(static_cast<size_t>(B * T * row_stride));
      for (auto& v : x) v = static_cast<float>(rng.normal());
      std::vector<float> ref = x, mine = x;
      if (dir > 0)
        hw::cpu::rope_forward(ref.data(), B, T, row_stride, col0, n_heads, hd, theta);
      else
        hw::cpu::rope_backward(ref.data(), B, T, row_stride, col0, n_heads, hd, theta);
      for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t i = 0; i < hd / 2; i++) {
          float c, s;
          rope_cos_sin(bt % T, i, hd, theta, dir, c, s);
          for (int64_t h = 0; h < n_heads; h++) {
            float* lo = mine.data() + rope_pair_offset(bt, h, i, row_stride, col0, hd);
            const float x1 = lo[0], x2 = lo[hd / 2];
            lo[0] = x1 * c - x2 * s;
            lo[hd / 2] = x2 * c + x1 * s;
          }
        }
      for (size_t k = 0; k < x.size(); k++) {
        INFO("dir=" << dir << " theta=" << theta << " k=" << k);
        REQUIRE(std::abs(mine[k] - ref[k]) <= 1e-6f * std::max(1.0f, std::abs(ref[k])));
      }
    }
  }
  // The angle itself against a closed form: pair i of width hd at position t.
  float c, s;
  rope_cos_sin(5, 3, 16, 10000.0, 1.0, c, s);
  const double angle = 5.0 * std::exp(-2.0 * 3.0 / 16.0 * std::log(10000.0));
  CHECK(std::abs(c - std::cos(angle)) < 1e-7);
  CHECK(std::abs(s - std::sin(angle)) < 1e-7);
}

// The online-softmax steps of the CUDA attention, chained over key tiles in the kernel's
// order (key_tile_ranges), against a dense softmax in double: output rows, the saved
// log-sum-exp, and the backward's probabilities and score gradients rebuilt from it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/attention_schedule.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/online_softmax.hpp"
#include "support/rel_err.hpp"

using namespace hw::tiles;

namespace {

struct Problem {
  int64_t T = 0;
  int D = 0;
  std::vector<float> s;     // T x T logits (already scaled)
  std::vector<float> v;     // T x D
  std::vector<float> dout;  // T x D
};

Problem make_problem(hw::Rng& rng, int64_t T, int D, double logit_scale, double shift) {
  Problem p;
  p.T = T;
  p.D = D;
  p.s.resize(static_cast<size_t>(T * T));
  for (auto& x : p.s) x = static_cast<float>(shift + logit_scale * rng.normal());
  p.v.resize(static_cast<size_t>(T * D));
  for (auto& x : p.v) x = static_cast<float>(rng.normal());
  p.dout.resize(static_cast<size_t>(T * D));
  for (auto& x : p.dout) x = static_cast<float>(rng.normal());
  return p;
}

struct Result {
  std::vector<float> out, lse;
};

// The forward as the kernel runs it: per query tile, per key tile of its ranges, the rows'
// online steps on the tile's (masked) logits, then O = O * corr + P V.
Result online_forward(const Problem& p, const KeyRule& r) {
  Result res;
  res.out.assign(static_cast<size_t>(p.T * p.D), 0.f);
  res.lse.assign(static_cast<size_t>(p.T), 0.f);
  std::vector<float> tile(kBc);
  for (int64_t i0 = 0; i0 < p.T; i0 += kBr) {
    const int64_t i1 = std::min(p.T, i0 + kBr);
    std::vector<OnlineRow> rows(static_cast<size_t>(i1 - i0));
    TileRange rg[2];
    const int n = key_tile_ranges(r, i0, i1, rg);
    for (int t = 0; t < n; ++t)
      for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
        const int64_t j0 = int64_t(kt) * kBc;
        const bool masked = tile_needs_mask(r, i0, j0, p.T);
        for (int64_t i = i0; i < i1; ++i) {
          for (int c = 0; c < kBc; ++c) {
            const int64_t j = j0 + c;
            const bool vis = !masked || (j < p.T && key_visible(r, i, j));
            tile[static_cast<size_t>(c)] = vis ? p.s[static_cast<size_t>(i * p.T + j)] : -INFINITY;
          }
          const float corr = online_row_step(rows[static_cast<size_t>(i - i0)], tile.data(), kBc);
          float* o = &res.out[static_cast<size_t>(i * p.D)];
          for (int d = 0; d < p.D; ++d) {
            float acc = o[d] * corr;
            for (int c = 0; c < kBc && j0 + c < p.T; ++c)
              acc += tile[static_cast<size_t>(c)] * p.v[static_cast<size_t>((j0 + c) * p.D + d)];
            o[d] = acc;
          }
        }
      }
    for (int64_t i = i0; i < i1; ++i) {
      const OnlineRow& row = rows[static_cast<size_t>(i - i0)];
      for (int d = 0; d < p.D; ++d) res.out[static_cast<size_t>(i * p.D + d)] /= row.l;
      res.lse[static_cast<size_t>(i)] = online_lse(row);
    }
  }
  return res;
}

bool visible_ref(const HeadShape& h, int64_t i, int64_t j) {
  if (j > i) return false;
  if (h.kind == kWindow) return j > i - h.window;
  if (h.kind == kSinkWindow) return j < h.sink || j > i - h.window;
  return true;
}

// |got - want| / max(|want|, floor), infinite for a NaN or an infinity on either side.
double rel_err(double got, double want, double floor) {
  return hw::test::ratio(hw::test::abs_err(got, want), std::max(std::abs(want), floor));
}
using hw::test::worse;

void check_against_dense(const Problem& p, const HeadShape& h) {
  const KeyRule r = key_rule_of(h, p.T);
  const Result res = online_forward(p, r);
  const float scale = 0.125f;
  double worst_out = 0, worst_lse = 0, worst_p = 0, worst_ds = 0;
  for (int64_t i = 0; i < p.T; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < p.T; ++j)
      if (visible_ref(h, i, j)) mx = std::max(mx, double(p.s[static_cast<size_t>(i * p.T + j)]));
    std::vector<double> prob(static_cast<size_t>(p.T), 0.0);
    double sum = 0;
    for (int64_t j = 0; j < p.T; ++j)
      if (visible_ref(h, i, j)) sum += prob[static_cast<size_t>(j)] = std::exp(double(p.s[size_t(i * p.T + j)]) - mx);
    for (auto& x : prob) x /= sum;
    worst_lse = worse(worst_lse, rel_err(res.lse[size_t(i)], mx + std::log(sum), 1.0));
    std::vector<double> o(static_cast<size_t>(p.D), 0.0);
    for (int64_t j = 0; j < p.T; ++j)
      for (int d = 0; d < p.D; ++d) o[size_t(d)] += prob[size_t(j)] * p.v[size_t(j * p.D + d)];
    for (int d = 0; d < p.D; ++d)
      worst_out = worse(worst_out, rel_err(res.out[size_t(i * p.D + d)], o[size_t(d)], 1e-2));
    // Backward: P from the saved lse and dS = P (dP - delta) against the softmax Jacobian in
    // double, dS_ij = p_ij (dP_ij - sum_k p_ik dP_ik) * scale.
    float delta = 0.f;
    for (int d = 0; d < p.D; ++d) delta += p.dout[size_t(i * p.D + d)] * res.out[size_t(i * p.D + d)];
    std::vector<double> dp(static_cast<size_t>(p.T), 0.0);
    double pdp = 0;
    for (int64_t j = 0; j < p.T; ++j) {
      for (int d = 0; d < p.D; ++d) dp[size_t(j)] += double(p.dout[size_t(i * p.D + d)]) * p.v[size_t(j * p.D + d)];
      pdp += prob[size_t(j)] * dp[size_t(j)];
    }
    // dS cancels (dP - delta) in float: measure it against the row's scale of p |dP|.
    double row_scale = 1e-6;
    for (int64_t j = 0; j < p.T; ++j)
      row_scale = hw::test::bigger_scale(row_scale, prob[size_t(j)] * dp[size_t(j)] * scale);
    for (int64_t j = 0; j < p.T; ++j) {
      const bool vis = visible_ref(h, i, j);
      const float pf = vis ? prob_from_lse(p.s[size_t(i * p.T + j)], res.lse[size_t(i)]) : 0.f;
      worst_p = worse(worst_p, rel_err(pf, prob[size_t(j)], 1e-3));
      const float ds = score_grad(pf, static_cast<float>(dp[size_t(j)]), delta, scale);
      const double ds_ref = prob[size_t(j)] * (dp[size_t(j)] - pdp) * scale;
      worst_ds = worse(worst_ds, hw::test::ratio(hw::test::abs_err(ds, ds_ref), row_scale));
    }
  }
  INFO("kind " << int(h.kind) << " sink " << h.sink << " window " << h.window << " T " << p.T);
  CHECK(worst_out < 2e-5);
  CHECK(worst_lse < 2e-6);
  CHECK(worst_p < 1e-4);  // float logits near 1000 carry 6e-5 of rounding themselves
  CHECK(worst_ds < 1e-4);
}

const std::vector<HeadShape> kShapes = {{kSoftmax, 0, 0},     {kWindow, 0, 1},      {kWindow, 0, 70},
                                        {kSinkWindow, 1, 1},  {kSinkWindow, 4, 33}, {kSinkWindow, 100, 64}};

}  // namespace

TEST_CASE("online softmax: chained over tiles in kernel order it matches a dense softmax in double") {
  hw::Rng rng(7);
  for (int64_t T : {1, 65, 200, 333})
    for (const HeadShape& h : kShapes) check_against_dense(make_problem(rng, T, 8, 2.0, 0.0), h);
}

TEST_CASE("online softmax: large and shifted logits stay finite and exact") {
  hw::Rng rng(11);
  for (const HeadShape& h : kShapes) {
    check_against_dense(make_problem(rng, 200, 4, 12.0, 0.0), h);    // rows dominated by a few keys
    check_against_dense(make_problem(rng, 133, 4, 1.0, 1000.0), h);  // exp would overflow without the max
  }
}

TEST_CASE("online softmax: a tile with no visible key leaves the row untouched") {
  OnlineRow r;
  float s[3] = {-INFINITY, -INFINITY, -INFINITY};
  REQUIRE(online_row_step(r, s, 3) == 1.0f);
  REQUIRE(r.l == 0.0f);
  REQUIRE(r.m == -INFINITY);
  REQUIRE(s[0] == 0.0f);
  float t[2] = {1.0f, -INFINITY};
  REQUIRE(online_row_step(r, t, 2) == 0.0f);  // nothing accumulated yet: correction 0
  REQUIRE(r.m == 1.0f);
  REQUIRE(r.l == 1.0f);
  float u[2] = {-INFINITY, -INFINITY};
  REQUIRE(online_row_step(r, u, 2) == 1.0f);
  REQUIRE(r.l == 1.0f);
  REQUIRE(online_lse(r) == 1.0f);
}

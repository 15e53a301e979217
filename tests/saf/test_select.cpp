// select: ranking with ties, KL gate skip/backfill, shortfall, random and gate-Taylor controls.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/methods/saf/select.hpp"

using namespace hw::saf;
using Pairs = std::vector<std::pair<int, int>>;

namespace {

// 3 layers x 4 heads; flat index order breaks the ties at 0.1 and 0.3.
ScoreGrid tie_scores() {
  return {{0.5, 0.1, 0.9, 0.3},
          {0.1, 0.7, 0.3, 0.2},
          {0.8, 0.6, 0.1, 0.4}};
}

}  // namespace

TEST_CASE("select: quota rounds half to even like Python") {
  REQUIRE(quota(0.25, 12, 12) == 36);
  REQUIRE(quota(0.25, 1, 10) == 2);  // 2.5
  REQUIRE(quota(0.75, 1, 10) == 8);  // 7.5
  REQUIRE(quota(0.0, 3, 4) == 0);
  REQUIRE_THROWS_AS(quota(1.5, 3, 4), hw::Error);
}

TEST_CASE("select: ascending score, ties by flat index, deterministic") {
  // Order by hand: (0,1)=0.1 f1, (1,0)=0.1 f4, (2,2)=0.1 f10, (1,3)=0.2, (0,3)=0.3 f3, (1,2)=0.3 f6
  const Selection s = select_by_score(Selector::Variance, tie_scores(), 0.5, FitGate{});
  REQUIRE(s.requested == 6);
  REQUIRE(s.heads == Pairs{{0, 1}, {1, 0}, {2, 2}, {1, 3}, {0, 3}, {1, 2}});
  REQUIRE(s.shortfall() == 0);
  REQUIRE(s.per_layer_counts() == std::vector<int>{2, 3, 1});
  REQUIRE(s.record(0, 1).scores.at("variance") == 0.1);
  REQUIRE_FALSE(s.record(0, 0).selected);
  const Selection again = select_by_score(Selector::Variance, tie_scores(), 0.5, FitGate{});
  REQUIRE(again.heads == s.heads);
}

TEST_CASE("select: the KL gate skips bad fits and backfills from the next candidates") {
  std::map<std::pair<int, int>, double> kl = {{{1, 0}, 0.5}, {{1, 3}, 0.2001}, {{0, 3}, NAN}};
  int calls = 0;
  FitGate gate = [&](int l, int h) {
    ++calls;
    auto it = kl.find({l, h});
    return it == kl.end() ? 0.05 : it->second;
  };
  const Selection s = select_by_score(Selector::KL, tie_scores(), 0.25, gate);  // k = 3
  // Candidates: (0,1) ok, (1,0) skip, (2,2) ok, (1,3) skip, (0,3) NaN skip, (1,2) ok.
  REQUIRE(s.heads == Pairs{{0, 1}, {2, 2}, {1, 2}});
  REQUIRE(calls == 6);
  REQUIRE(s.record(1, 0).skipped);
  REQUIRE(s.record(1, 0).tried);
  REQUIRE(s.record(1, 0).fit_kl == 0.5);
  REQUIRE(s.record(1, 3).skipped);
  REQUIRE(s.record(0, 3).skipped);
  REQUIRE_FALSE(s.record(0, 0).tried);  // never reached
  REQUIRE(s.shortfall() == 0);
  const auto j = s.to_json();
  REQUIRE(j["selector"] == "kl");
  REQUIRE(j["max_kl"] == 0.2);
  REQUIRE(j["selected"].size() == 3);
  REQUIRE(j["heads"][4]["skipped"] == true);    // (1,0)
  REQUIRE(j["heads"][4]["fit_kl"] == 0.5);
  REQUIRE(j["heads"][0]["fit_kl"].is_null());   // (0,0) never tried
  REQUIRE(j["heads"][1]["selected"] == true);   // (0,1)
  REQUIRE(j["heads"][1]["scores"]["kl"] == 0.1);

  // Every fit fails: the whole quota is reported as shortfall.
  const Selection none =
      select_by_score(Selector::Variance, tie_scores(), 0.25, [](int, int) { return 1.0; });
  REQUIRE(none.heads.empty());
  REQUIRE(none.shortfall() == 3);
  REQUIRE(none.to_json()["shortfall"] == 3);
}

TEST_CASE("select: random control matches per-layer counts and backfills within layers") {
  ScoreGrid v(6, std::vector<double>(8));
  for (int l = 0; l < 6; ++l)
    for (int h = 0; h < 8; ++h) v[l][h] = (l == 0 ? 0.0 : l == 1 ? 0.05 : 1.0) + 0.01 * ((h * 5 + l) % 8);
  const Selection var = select_by_score(Selector::Variance, v, 0.25, FitGate{});  // 12 heads
  const auto counts = var.per_layer_counts();
  REQUIRE(counts == std::vector<int>{8, 4, 0, 0, 0, 0});
  // Heads 0 and 1 of every layer always fail their fit.
  FitGate gate = [](int, int h) { return h < 2 ? 0.9 : 0.0; };
  const Selection r1 = select_random(var, 99, gate);
  const Selection r2 = select_random(var, 99, gate);
  REQUIRE(r1.heads == r2.heads);
  REQUIRE(r1.requested == 12);
  // Layer 0 wants 8 but only 6 heads can pass: shortfall 2; layer 1 gets its 4.
  REQUIRE(r1.per_layer_counts() == std::vector<int>{6, 4, 0, 0, 0, 0});
  REQUIRE(r1.shortfall() == 2);
  for (const auto& [l, h] : r1.heads) REQUIRE(h >= 2);
  // Without a gate, counts match exactly and seeds change the heads chosen in layer 1.
  std::set<Pairs> distinct;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Selection r = select_random(var, seed, FitGate{});
    REQUIRE(r.per_layer_counts() == counts);
    REQUIRE(r.shortfall() == 0);
    std::set<std::pair<int, int>> uniq(r.heads.begin(), r.heads.end());
    REQUIRE(uniq.size() == r.heads.size());
    distinct.insert(r.heads);
  }
  REQUIRE(distinct.size() > 1);
  REQUIRE_THROWS_AS(select_random(select_gate_taylor(v, 0.25), 1, FitGate{}), hw::Error);
}

TEST_CASE("select: gate-Taylor normalises each layer by its L2 norm, then ranks globally") {
  // Layer 0 is large overall; after normalisation its small head becomes the lowest.
  const ScoreGrid raw = {{3.0, 4.0, 100.0, 1.0}, {0.3, 0.4, 0.5, 0.6}, {0.0, 0.0, 0.0, 0.0}};
  const Selection s = select_gate_taylor(raw, 0.5);  // k = 6
  // Normalised: layer 0 / sqrt(10026) = {.02996, .03995, .9987, .00999}; layer 1 / sqrt(.86)
  // = {.3235, .4313, .5392, .6470}; layer 2 stays 0. Ascending: (2,0..3), (0,3), (0,0).
  REQUIRE(s.heads == Pairs{{2, 0}, {2, 1}, {2, 2}, {2, 3}, {0, 3}, {0, 0}});
  REQUIRE(s.record(0, 3).scores.at("gate_taylor") == Approx(1.0 / std::sqrt(10026.0)));
  REQUIRE(s.record(1, 0).scores.at("gate_taylor") == Approx(0.3 / std::sqrt(0.86)));
  REQUIRE(s.record(1, 0).scores.at("gate_taylor_raw") == 0.3);
  REQUIRE_FALSE(s.gated);
  REQUIRE(s.to_json()["max_kl"].is_null());
  // Raw ranking would have picked layer 1 before (0,3): normalisation matters.
  const ScoreGrid neg = {{-1.0, 1.0}};
  REQUIRE_THROWS_AS(select_gate_taylor(neg, 0.5), hw::Error);
  // Raw scores: mean over sequences of |derivative|.
  const ScoreGrid m = gate_taylor_raw_scores({{{-1.0, 2.0}}, {{3.0, -4.0}}});
  REQUIRE(m == ScoreGrid{{2.0, 3.0}});
}

TEST_CASE("select: bad grids are errors and selections mark a head plan") {
  REQUIRE_THROWS_AS(select_by_score(Selector::Variance, {{0.1, 0.2}, {0.3}}, 0.5, FitGate{}),
                    hw::Error);
  REQUIRE_THROWS_AS(select_by_score(Selector::Variance, {{0.1, NAN}}, 0.5, FitGate{}), hw::Error);
  REQUIRE_THROWS_AS(select_by_score(Selector::Random, tie_scores(), 0.5, FitGate{}), hw::Error);
  REQUIRE(parse_selector("gate_taylor") == Selector::GateTaylor);
  REQUIRE_THROWS_AS(parse_selector("entropy"), hw::Error);
  const Selection s = select_by_score(Selector::Variance, tie_scores(), 0.25, FitGate{});
  hw::attn::HeadPlan plan;
  plan.layers.assign(3, hw::attn::LayerPlan(4));
  mark_in_plan(plan, s, hw::attn::HeadKind::Static);
  REQUIRE(plan.layers[0][1].kind == hw::attn::HeadKind::Static);
  REQUIRE(plan.layers[2][2].kind == hw::attn::HeadKind::Static);
  REQUIRE(plan.layers[0][0].kind == hw::attn::HeadKind::Softmax);
  hw::attn::HeadPlan wrong;
  wrong.layers.assign(2, hw::attn::LayerPlan(4));
  REQUIRE_THROWS_AS(mark_in_plan(wrong, s, hw::attn::HeadKind::Static), hw::Error);
}

TEST_CASE("select: only eligible heads are candidates, ratio_of counts all heads or the remaining ones") {
  // Layer 0 head 1 and layer 1 head 0 (scores 0.1, the two lowest) are already static.
  hw::attn::HeadPlan plan;
  plan.layers.assign(3, hw::attn::LayerPlan(4));
  plan.layers[0][1].kind = hw::attn::HeadKind::Static;
  plan.layers[1][0].kind = hw::attn::HeadKind::Static;
  const Candidates all = softmax_candidates(plan, 0.25, "all");              // round(0.25 x 12) = 3
  const Candidates remaining = softmax_candidates(plan, 0.25, "remaining");  // round(0.25 x 10) = 2 (2.5)
  CHECK(all.requested == 3);
  CHECK(remaining.requested == 2);
  CHECK(!all.allows(1));
  CHECK(!all.allows(4));
  CHECK(all.allows(0));
  // By hand: eligible scores ascending 0.1 (2,2), 0.2 (1,3), 0.3 (0,3), 0.3 (1,2), ...
  const Selection s = select_by_score(Selector::Variance, tie_scores(), 0.25, FitGate{}, kDefaultMaxKl, all);
  CHECK(s.heads == Pairs{{2, 2}, {1, 3}, {0, 3}});
  const Selection r = select_by_score(Selector::Variance, tie_scores(), 0.25, FitGate{}, kDefaultMaxKl, remaining);
  CHECK(r.heads == Pairs{{2, 2}, {1, 3}});
  // Gate-Taylor (row-normalised scores) and the random control skip them too.
  const Selection g = select_gate_taylor(tie_scores(), 0.25, all);
  for (const auto& [l, h] : g.heads) CHECK(all.allows(l * 4 + h));
  const Selection x = select_random(s, 7, FitGate{}, kDefaultMaxKl, all);
  CHECK(x.heads.size() == 3);
  for (const auto& [l, h] : x.heads) CHECK(all.allows(l * 4 + h));
  CHECK_THROWS_AS(softmax_candidates(plan, 0.25, "some"), hw::Error);
}

#include "headwise/methods/saf/select.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::saf {

namespace {

// Validates a [L][H] grid of finite scores and returns (L, H).
std::pair<int, int> grid_shape(const ScoreGrid& g, const std::string& what) {
  check(!g.empty() && !g[0].empty(), "saf selection: empty " + what + " grid");
  const int L = int(g.size()), H = int(g[0].size());
  for (int l = 0; l < L; ++l) {
    check(int(g[l].size()) == H, "saf selection: " + what + " grid layer " + std::to_string(l) +
                                     " has " + std::to_string(g[l].size()) + " heads, expected " +
                                     std::to_string(H));
    for (int h = 0; h < H; ++h)
      check(std::isfinite(g[l][h]), "saf selection: " + what + " score of layer " +
                                        std::to_string(l) + " head " + std::to_string(h) +
                                        " is not finite");
  }
  return {L, H};
}

Selection make_selection(Selector sel, std::string score_name, int L, int H, double ratio,
                         bool gated, double max_kl) {
  check(!gated || (max_kl >= 0 && !std::isnan(max_kl)),
        "saf selection: max_kl must be >= 0");
  Selection s;
  s.selector = sel;
  s.score_name = std::move(score_name);
  s.n_layer = L;
  s.n_head = H;
  s.ratio = ratio;
  s.gated = gated;
  s.max_kl = max_kl;
  s.records.resize(size_t(L) * H);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      s.record(l, h).layer = l;
      s.record(l, h).head = h;
    }
  return s;
}

// Tries one candidate: runs the gate (if any), records the outcome, accepts on pass.
bool try_candidate(Selection& s, int l, int h, const FitGate& gate) {
  HeadRecord& r = s.record(l, h);
  if (gate) {
    r.tried = true;
    r.fit_kl = gate(l, h);
    if (!(std::isfinite(r.fit_kl) && r.fit_kl <= s.max_kl)) {
      r.skipped = true;
      return false;
    }
  }
  r.selected = true;
  s.heads.emplace_back(l, h);
  return true;
}

// Flat indices ordered by ascending score, ties by flat index.
std::vector<int> ascending(const ScoreGrid& g, int L, int H) {
  std::vector<int> order(size_t(L) * H);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const double sa = g[a / H][a % H], sb = g[b / H][b % H];
    return sa < sb || (sa == sb && a < b);
  });
  return order;
}

}  // namespace

Selector parse_selector(const std::string& name) {
  if (name == "variance") return Selector::Variance;
  if (name == "kl") return Selector::KL;
  if (name == "random") return Selector::Random;
  if (name == "gate_taylor") return Selector::GateTaylor;
  fail("unknown SAF selector '" + name + "' (expected variance, kl, random or gate_taylor)");
}

std::string selector_name(Selector s) {
  switch (s) {
    case Selector::Variance: return "variance";
    case Selector::KL: return "kl";
    case Selector::Random: return "random";
    case Selector::GateTaylor: return "gate_taylor";
  }
  fail("bad SAF selector");
}

int quota(double ratio, int n_layer, int n_head) {
  check(ratio >= 0.0 && ratio <= 1.0,
        "saf selection: ratio must be in [0, 1] (got " + std::to_string(ratio) + ")");
  check(n_layer >= 1 && n_head >= 1, "saf selection: model has no heads");
  return int(std::nearbyint(ratio * double(n_layer) * double(n_head)));  // default: half-even
}

Candidates softmax_candidates(const attn::HeadPlan& plan, double ratio, const std::string& ratio_of) {
  check(ratio_of == "all" || ratio_of == "remaining", "saf selection: ratio_of must be all or remaining");
  Candidates c;
  int n = 0, total = 0;
  for (const auto& layer : plan.layers)
    for (const auto& spec : layer) {
      c.eligible.push_back(spec.kind == attn::HeadKind::Softmax ? 1 : 0);
      n += c.eligible.back();
      ++total;
    }
  check(ratio >= 0.0 && ratio <= 1.0, "saf selection: ratio must be in [0, 1] (got " + std::to_string(ratio) + ")");
  c.requested = int(std::nearbyint(ratio * double(ratio_of == "all" ? total : n)));
  return c;
}

std::vector<int> Selection::per_layer_counts() const {
  std::vector<int> c(size_t(n_layer), 0);
  for (const auto& [l, h] : heads) ++c[size_t(l)];
  return c;
}

nlohmann::json Selection::to_json() const {
  nlohmann::json j;
  j["selector"] = selector_name(selector);
  j["score"] = score_name;
  j["ratio"] = ratio;
  j["requested"] = requested;
  j["shortfall"] = shortfall();
  j["max_kl"] = gated ? nlohmann::json(max_kl) : nlohmann::json(nullptr);
  j["per_layer_counts"] = per_layer_counts();
  auto sel = nlohmann::json::array();
  for (const auto& [l, h] : heads) sel.push_back({l, h});
  j["selected"] = sel;
  auto hs = nlohmann::json::array();
  for (const HeadRecord& r : records) {
    nlohmann::json o;
    o["layer"] = r.layer;
    o["head"] = r.head;
    o["scores"] = r.scores;
    o["selected"] = r.selected;
    o["fit_kl"] = r.tried && std::isfinite(r.fit_kl) ? nlohmann::json(r.fit_kl)
                                                     : nlohmann::json(nullptr);
    o["skipped"] = r.skipped;
    hs.push_back(std::move(o));
  }
  j["heads"] = hs;
  return j;
}

Selection select_by_score(Selector selector, const ScoreGrid& scores, double ratio,
                          const FitGate& gate, double max_kl, const Candidates& cand) {
  check(selector == Selector::Variance || selector == Selector::KL,
        "saf::select_by_score: only the variance and kl selectors rank by a score");
  const std::string name = selector_name(selector);
  const auto [L, H] = grid_shape(scores, name);
  Selection s = make_selection(selector, name, L, H, ratio, bool(gate), max_kl);
  s.requested = cand.requested >= 0 ? cand.requested : quota(ratio, L, H);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) s.record(l, h).scores[name] = scores[l][h];
  for (int flat : ascending(scores, L, H)) {
    if (int(s.heads.size()) >= s.requested) break;
    if (cand.allows(flat)) try_candidate(s, flat / H, flat % H, gate);
  }
  return s;
}

Selection select_random(const Selection& v, uint64_t seed, const FitGate& gate, double max_kl,
                        const Candidates& cand) {
  check(v.selector == Selector::Variance,
        "saf::select_random: per-layer counts must come from a variance selection");
  const int L = v.n_layer, H = v.n_head;
  Selection s = make_selection(Selector::Random, "random_rank", L, H, v.ratio, bool(gate), max_kl);
  const std::vector<int> counts = v.per_layer_counts();
  s.requested = std::accumulate(counts.begin(), counts.end(), 0);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) s.record(l, h).scores = v.record(l, h).scores;
  Rng rng(seed);
  std::vector<int> order(static_cast<size_t>(H));
  for (int l = 0; l < L; ++l) {
    std::iota(order.begin(), order.end(), 0);
    for (int t = H - 1; t > 0; --t)
      std::swap(order[size_t(t)], order[size_t(rng.below(uint64_t(t) + 1))]);
    for (int rank = 0; rank < H; ++rank) s.record(l, order[size_t(rank)]).scores["random_rank"] = rank;
    int taken = 0;
    for (int rank = 0; rank < H && taken < counts[size_t(l)]; ++rank)
      if (cand.allows(l * H + order[size_t(rank)]) && try_candidate(s, l, order[size_t(rank)], gate)) ++taken;
  }
  return s;
}

Selection select_gate_taylor(const ScoreGrid& raw, double ratio, const Candidates& cand) {
  const auto [L, H] = grid_shape(raw, "gate_taylor");
  Selection s = make_selection(Selector::GateTaylor, "gate_taylor", L, H, ratio, false,
                               kDefaultMaxKl);
  s.requested = cand.requested >= 0 ? cand.requested : quota(ratio, L, H);
  ScoreGrid norm = raw;
  for (int l = 0; l < L; ++l) {
    double sq = 0.0;
    for (int h = 0; h < H; ++h) {
      check(raw[l][h] >= 0.0, "saf selection: gate_taylor score of layer " + std::to_string(l) +
                                  " head " + std::to_string(h) + " is negative");
      sq += raw[l][h] * raw[l][h];
    }
    const double n = std::max(std::sqrt(sq), std::numeric_limits<double>::min());
    for (int h = 0; h < H; ++h) {
      norm[l][h] = raw[l][h] / n;
      s.record(l, h).scores["gate_taylor_raw"] = raw[l][h];
      s.record(l, h).scores["gate_taylor"] = norm[l][h];
    }
  }
  for (int flat : ascending(norm, L, H)) {
    if (int(s.heads.size()) >= s.requested) break;
    if (cand.allows(flat)) try_candidate(s, flat / H, flat % H, FitGate{});
  }
  return s;
}

ScoreGrid gate_taylor_raw_scores(const std::vector<ScoreGrid>& per_seq) {
  check(!per_seq.empty(), "saf::gate_taylor_raw_scores: no calibration sequences");
  const auto [L, H] = grid_shape(per_seq[0], "gate derivative");
  ScoreGrid raw(size_t(L), std::vector<double>(size_t(H), 0.0));
  for (const ScoreGrid& g : per_seq) {
    const auto shape = grid_shape(g, "gate derivative");
    check(shape.first == L && shape.second == H,
          "saf::gate_taylor_raw_scores: sequences have different layer/head shapes");
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) raw[l][h] += std::abs(g[l][h]);
  }
  for (auto& row : raw)
    for (double& x : row) x /= double(per_seq.size());
  return raw;
}

void mark_in_plan(attn::HeadPlan& plan, const Selection& s, attn::HeadKind kind) {
  check(int(plan.layers.size()) == s.n_layer,
        "saf::mark_in_plan: plan has " + std::to_string(plan.layers.size()) +
            " layers, selection has " + std::to_string(s.n_layer));
  for (const auto& layer : plan.layers)
    check(int(layer.size()) == s.n_head, "saf::mark_in_plan: plan layer width differs from " +
                                             std::to_string(s.n_head) + " heads");
  for (const auto& [l, h] : s.heads) plan.layers[size_t(l)][size_t(h)].kind = kind;
}

}  // namespace hw::saf

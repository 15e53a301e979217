#include "headwise/methods/oal/grouping.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/rng.hpp"

namespace hw::oal {

std::vector<int> Grouping::sizes() const {
  std::vector<int> s(size_t(n_groups), 0);
  for (int32_t g : groups) s[size_t(g - 1)] += 1;
  return s;
}

nlohmann::json Grouping::to_json() const {
  return {{"n_groups", n_groups}, {"groups", groups}, {"sizes", sizes()},
          {"order", order},       {"cuts", cuts},     {"candidates", candidates}};
}

std::string GroupingSpec::str() const {
  switch (kind) {
    case GroupingKind::Bootstrap: return "bootstrap";
    case GroupingKind::Fixed: return "fixed:" + std::to_string(n_groups);
    case GroupingKind::Random: return "random";
  }
  return "?";
}

GroupingSpec parse_grouping(const std::string& text, int head_dim, const std::string& key) {
  GroupingSpec s;
  if (text == "bootstrap") return s;
  if (text == "random") {
    s.kind = GroupingKind::Random;
    return s;
  }
  if (text.rfind("fixed:", 0) == 0) {
    const std::string n = text.substr(6);
    size_t used = 0;
    int g = 0;
    try {
      g = std::stoi(n, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(!n.empty() && used == n.size(), key + ": \"" + text + "\" is not fixed:G with an integer G");
    check(g >= 1 && g <= head_dim, key + ": G = " + std::to_string(g) + " is outside 1..head_dim (" +
                                       std::to_string(head_dim) + ")");
    s.kind = GroupingKind::Fixed;
    s.n_groups = g;
    return s;
  }
  fail(key + " must be bootstrap, fixed:G or random, got \"" + text_brief(text) + "\"");
}

std::vector<int> contribution_order(const std::vector<double>& chi) {
  std::vector<int> order(chi.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return chi[size_t(a)] < chi[size_t(b)]; });
  return order;
}

Grouping groups_from_cuts(const std::vector<int>& order, std::vector<int> cuts) {
  const int d = int(order.size());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (int k : cuts) check(k >= 1 && k < d, "OAL grouping: cut " + std::to_string(k) + " outside 1..d-1");
  Grouping g;
  g.order = order;
  g.cuts = cuts;
  g.n_groups = int(cuts.size()) + 1;
  g.groups.assign(size_t(d), 1);
  size_t c = 0;
  for (int pos = 0; pos < d; ++pos) {
    while (c < cuts.size() && pos >= cuts[c]) ++c;
    g.groups[size_t(order[size_t(pos)])] = int32_t(c + 1);
  }
  return g;
}

std::vector<int> tail_candidates(int d, double tail_fraction) {
  const int m = int(std::ceil(tail_fraction * double(d) - 1e-9));
  std::vector<int> ks;
  for (int k = std::max(1, d - m); k <= d - 1; ++k) ks.push_back(k);
  return ks;
}

namespace {

double ratio_at(const std::vector<double>& chi, const std::vector<int>& order, int k, double eps) {
  return chi[size_t(order[size_t(k)])] / std::max(chi[size_t(order[size_t(k - 1)])], eps);
}

}  // namespace

Grouping bootstrap_grouping(const std::vector<std::vector<double>>& per_prompt, const GroupingOptions& opt,
                            uint64_t seed) {
  check(!per_prompt.empty(), "OAL grouping: no prompts");
  const int P = int(per_prompt.size()), d = int(per_prompt.front().size());
  std::vector<double> chi(size_t(d), 0.0);
  for (const auto& p : per_prompt)
    for (int r = 0; r < d; ++r) chi[size_t(r)] += p[size_t(r)] / double(P);
  const std::vector<int> order = contribution_order(chi);
  const std::vector<int> ks = tail_candidates(d, opt.tail_fraction);

  // Support: in each resample, min over the upper set / max over the lower set, via a prefix
  // max and a suffix min along the fixed order.
  std::vector<int> hits(ks.size(), 0);
  Rng rng(seed);
  std::vector<double> cb(static_cast<size_t>(d)), pre_max(static_cast<size_t>(d)), suf_min(static_cast<size_t>(d));
  for (int b = 0; b < opt.bootstrap; ++b) {
    std::fill(cb.begin(), cb.end(), 0.0);
    for (int p = 0; p < P; ++p) {
      const auto& row = per_prompt[size_t(rng.below(uint64_t(P)))];
      for (int r = 0; r < d; ++r) cb[size_t(r)] += row[size_t(r)];
    }
    for (int pos = 0; pos < d; ++pos) {
      const double v = cb[size_t(order[size_t(pos)])] / double(P);
      pre_max[size_t(pos)] = pos == 0 ? v : std::max(pre_max[size_t(pos - 1)], v);
    }
    for (int pos = d - 1; pos >= 0; --pos) {
      const double v = cb[size_t(order[size_t(pos)])] / double(P);
      suf_min[size_t(pos)] = pos == d - 1 ? v : std::min(suf_min[size_t(pos + 1)], v);
    }
    for (size_t c = 0; c < ks.size(); ++c) {
      const int k = ks[c];  // lower = positions [0, k), upper = [k, d)
      if (suf_min[size_t(k)] / std::max(pre_max[size_t(k - 1)], opt.eps) >= opt.ratio_threshold) hits[c] += 1;
    }
  }

  struct Cand {
    int k;
    double ratio, support;
    bool natural;
  };
  std::vector<Cand> cands;
  nlohmann::json cj = nlohmann::json::array();
  for (size_t c = 0; c < ks.size(); ++c) {
    const double rho = ratio_at(chi, order, ks[c], opt.eps);
    const double s = opt.bootstrap > 0 ? double(hits[c]) / double(opt.bootstrap) : 0.0;
    const bool natural = rho >= opt.ratio_threshold && s >= opt.support;
    cands.push_back({ks[c], rho, s, natural});
    cj.push_back({{"k", ks[c]}, {"ratio", rho}, {"support", s}, {"natural", natural}});
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    if (a.support != b.support) return a.support > b.support;
    if (a.ratio != b.ratio) return a.ratio > b.ratio;
    return a.k < b.k;
  });
  const size_t max_cuts = size_t(std::max(opt.max_groups - 1, 0));
  const size_t min_cuts = size_t(std::max(opt.min_groups - 1, 0));
  std::vector<int> cuts;
  for (const Cand& c : cands)
    if (c.natural && cuts.size() < max_cuts) cuts.push_back(c.k);
  for (const Cand& c : cands)
    if (!c.natural && cuts.size() < min_cuts) cuts.push_back(c.k);
  Grouping g = groups_from_cuts(order, cuts);
  g.candidates = std::move(cj);
  return g;
}

Grouping fixed_grouping(const std::vector<double>& chi, int n_groups, double tail_fraction, double eps) {
  const int d = int(chi.size());
  check(n_groups >= 1 && n_groups <= d, "OAL grouping: fixed:" + std::to_string(n_groups) + " is outside 1..head_dim (" +
                                            std::to_string(d) + ")");
  const std::vector<int> order = contribution_order(chi);
  std::vector<int> ks = tail_candidates(d, tail_fraction);
  if (int(ks.size()) < n_groups - 1) {
    ks.clear();
    for (int k = 1; k < d; ++k) ks.push_back(k);
  }
  std::vector<std::pair<double, int>> by_ratio;
  for (int k : ks) by_ratio.push_back({ratio_at(chi, order, k, eps), k});
  std::stable_sort(by_ratio.begin(), by_ratio.end(),
                   [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<int> cuts;
  for (int i = 0; i < n_groups - 1; ++i) cuts.push_back(by_ratio[size_t(i)].second);
  return groups_from_cuts(order, cuts);
}

Grouping random_grouping(const Grouping& like, uint64_t seed) {
  const int d = int(like.groups.size());
  std::vector<int> perm(static_cast<size_t>(d));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed);
  for (int i = d - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.below(uint64_t(i + 1)))]);
  // The shuffled dimensions take the places of the ordered ones: same cuts, same group sizes.
  Grouping g = groups_from_cuts(perm, like.cuts);
  return g;
}

}  // namespace hw::oal

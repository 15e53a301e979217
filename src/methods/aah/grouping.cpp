#include "headwise/methods/aah/grouping.hpp"

#include <algorithm>
#include <cmath>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::aah {

namespace {

double norm(const Vec& a) {
  double s = 0;
  for (double x : a) s += x * x;
  return std::sqrt(s);
}

void sort_groups(Groups& g) {
  for (auto& m : g) std::sort(m.begin(), m.end());
  std::sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
}

// Greedy leader clustering in item order against running centroids.
template <class Sim>
Groups leader(const std::vector<Vec>& x, double threshold, Sim sim) {
  Groups groups;
  std::vector<Vec> centroid;
  for (int i = 0; i < int(x.size()); ++i) {
    int best = -1;
    double best_sim = 0;
    for (int g = 0; g < int(groups.size()); ++g) {
      const double s = sim(x[size_t(i)], centroid[size_t(g)]);
      if (best < 0 || s > best_sim) best = g, best_sim = s;
    }
    if (best >= 0 && best_sim >= threshold) {
      groups[size_t(best)].push_back(i);
      centroid[size_t(best)] = mean_of(x, groups[size_t(best)]);
    } else {
      groups.push_back({i});
      centroid.push_back(x[size_t(i)]);
    }
  }
  return groups;
}

}  // namespace

double cosine(const Vec& a, const Vec& b) {
  const double na = norm(a), nb = norm(b);
  if (na == 0 || nb == 0) return 0;
  double dot = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
  return dot / (na * nb);
}

double norm_penalised(const Vec& a, const Vec& b) {
  const double na = norm(a), nb = norm(b), mx = std::max(na, nb);
  return cosine(a, b) - (mx > 0 ? 16.0 * std::fabs(na - nb) / mx : 0.0);
}

Vec mean_of(const std::vector<Vec>& x, const std::vector<int>& members) {
  Vec m(x.empty() ? 0 : x[0].size(), 0.0);
  for (int i : members)
    for (size_t d = 0; d < m.size(); ++d) m[d] += x[size_t(i)][d];
  for (double& v : m) v /= double(members.size());
  return m;
}

std::vector<int> Hierarchy::heads_of(int level, int g) const {
  std::vector<int> nodes = levels[size_t(level)][size_t(g)];
  for (int l = level - 1; l >= 0; --l) {
    std::vector<int> below;
    for (int n : nodes)
      for (int c : levels[size_t(l)][size_t(n)]) below.push_back(c);
    nodes = std::move(below);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

Groups head_groups(const std::vector<Vec>& heads, double similarity) {
  const int n = int(heads.size());
  Groups g = leader(heads, similarity, cosine);
  if (g.size() == 1 && n >= 2) {
    int a = 0, b = 1;
    double lo = cosine(heads[0], heads[1]);
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (const double s = cosine(heads[size_t(i)], heads[size_t(j)]); s < lo) lo = s, a = i, b = j;
    g = {{a}, {b}};
    for (int i = 0; i < n; ++i)
      if (i != a && i != b)
        g[cosine(heads[size_t(i)], heads[size_t(a)]) >= cosine(heads[size_t(i)], heads[size_t(b)]) ? 0 : 1].push_back(i);
  }
  while (g.size() > 2) {
    int small = -1;
    for (int k = 0; k < int(g.size()); ++k)
      if (g[size_t(k)].size() < 3 && (small < 0 || g[size_t(k)].size() < g[size_t(small)].size())) small = k;
    if (small < 0) break;
    const Vec c = mean_of(heads, g[size_t(small)]);
    int into = -1;
    double best = 0;
    for (int k = 0; k < int(g.size()); ++k) {
      if (k == small) continue;
      const double s = cosine(c, mean_of(heads, g[size_t(k)]));
      if (into < 0 || s > best) into = k, best = s;
    }
    for (int i : g[size_t(small)]) g[size_t(into)].push_back(i);
    g.erase(g.begin() + small);
  }
  sort_groups(g);
  return g;
}

Groups upper_groups(const std::vector<Vec>& nodes, double upper_similarity) {
  Groups g = leader(nodes, upper_similarity, norm_penalised);
  sort_groups(g);
  return g;
}

Hierarchy build_upper(const std::vector<Vec>& heads, const Groups& level0, double upper_similarity, int max_depth) {
  check(max_depth >= 1, "aah: max_depth must be >= 1");
  Hierarchy h;
  h.levels.push_back(level0);
  while (h.depth() < max_depth && h.levels.back().size() > 1) {
    const int l = h.depth() - 1;
    std::vector<Vec> feats;
    for (int g = 0; g < int(h.levels.back().size()); ++g) feats.push_back(mean_of(heads, h.heads_of(l, g)));
    Groups up = upper_groups(feats, upper_similarity);
    if (up.size() == h.levels.back().size()) break;  // merged nothing: a copy of the level below
    h.levels.push_back(std::move(up));
  }
  return h;
}

Groups balanced_random_groups(int n, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[size_t(i)] = i;
  Rng rng(seed);
  for (int i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(rng.below(uint64_t(i + 1)))]);
  const int k = std::min(2, n);
  Groups g(static_cast<size_t>(k));
  for (int i = 0; i < n; ++i) g[size_t(i % k)].push_back(order[size_t(i)]);
  sort_groups(g);
  return g;
}

Groups singleton_groups(int n) {
  Groups g;
  for (int i = 0; i < n; ++i) g.push_back({i});
  return g;
}

}  // namespace hw::aah

#include "headwise/methods/aah/policy.hpp"

#include <algorithm>
#include <cmath>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::aah {

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

Mlp Mlp::seeded(int in, int hidden, int out, uint64_t seed) {
  Mlp m;
  m.in = in, m.hidden = hidden, m.out = out;
  Rng rng(seed);
  auto fill = [&](std::vector<double>& v, size_t n, int fan_in) {
    const double bound = 1.0 / std::sqrt(double(fan_in));
    v.resize(n);
    for (double& x : v) x = bound * (2.0 * rng.uniform() - 1.0);
  };
  fill(m.w1, size_t(hidden) * size_t(in), in);
  fill(m.b1, size_t(hidden), in);
  fill(m.w2, size_t(out) * size_t(hidden), hidden);
  fill(m.b2, size_t(out), hidden);
  return m;
}

Vec Mlp::forward(const Vec& x) const {
  check(int(x.size()) == in, "aah: MLP input has " + std::to_string(x.size()) + " values, expected " + std::to_string(in));
  Vec h(static_cast<size_t>(hidden)), y(static_cast<size_t>(out));
  for (int j = 0; j < hidden; ++j) {
    double s = b1[size_t(j)];
    for (int i = 0; i < in; ++i) s += w1[size_t(j * in + i)] * x[size_t(i)];
    h[size_t(j)] = gelu(s);
  }
  for (int k = 0; k < out; ++k) {
    double s = b2[size_t(k)];
    for (int j = 0; j < hidden; ++j) s += w2[size_t(k * hidden + j)] * h[size_t(j)];
    y[size_t(k)] = s;
  }
  return y;
}

Policy::Policy(uint64_t seed, int n_windows)
    : n_windows_(n_windows),
      controller_(Mlp::seeded(kControllerInputs, 16, n_windows, data::derive_seed(seed, data::Stream::AahPolicy, 0))),
      joint_(Mlp::seeded(3 * kControllerInputs, 32, 2 * n_windows, data::derive_seed(seed, data::Stream::AahPolicy, 1))) {}

std::vector<std::vector<Vec>> Policy::controller_inputs(const std::vector<Vec>& heads, const Hierarchy& h) {
  std::vector<std::vector<Vec>> feats(size_t(h.depth())), in(size_t(h.depth()));
  for (int l = 0; l < h.depth(); ++l)
    for (int g = 0; g < int(h.levels[size_t(l)].size()); ++g) feats[size_t(l)].push_back(mean_of(heads, h.heads_of(l, g)));
  for (int l = 0; l < h.depth(); ++l) {
    const auto& f = feats[size_t(l)];
    const int n = int(f.size());
    std::vector<int> parent(size_t(n), -1);
    if (l + 1 < h.depth())
      for (int p = 0; p < int(h.levels[size_t(l + 1)].size()); ++p)
        for (int c : h.levels[size_t(l + 1)][size_t(p)]) parent[size_t(c)] = p;
    std::vector<int> all(static_cast<size_t>(n));
    for (int g = 0; g < n; ++g) all[size_t(g)] = g;
    const Vec level_mean = mean_of(f, all);
    double mean_norm = 0;
    std::vector<double> norms(static_cast<size_t>(n));
    for (int g = 0; g < n; ++g) {
      double s = 0;
      for (double x : f[size_t(g)]) s += x * x;
      norms[size_t(g)] = std::sqrt(s);
      mean_norm += norms[size_t(g)] / double(n);
    }
    for (int g = 0; g < n; ++g) {
      Vec u;
      u.reserve(kControllerInputs);
      for (double x : f[size_t(g)]) u.push_back(x);
      u.push_back(double(l));
      for (int d = 0; d < kFeatures; ++d)
        u.push_back(parent[size_t(g)] >= 0 ? f[size_t(g)][size_t(d)] - feats[size_t(l + 1)][size_t(parent[size_t(g)])][size_t(d)]
                                           : 0.0);
      for (int d = 0; d < kFeatures; ++d) u.push_back(f[size_t(g)][size_t(d)] - level_mean[size_t(d)]);
      u.push_back(mean_norm > 0 ? norms[size_t(g)] / mean_norm : 1.0);
      in[size_t(l)].push_back(std::move(u));
    }
  }
  return in;
}

Selection Policy::select(const std::vector<Vec>& heads, const Hierarchy& h, bool joint, bool parent_constraint) const {
  check(h.depth() >= 1, "aah: empty hierarchy");
  for (const Vec& f : heads) check(int(f.size()) == kFeatures, "aah: a head's features must have 9 values");
  const auto inputs = controller_inputs(heads, h);
  Selection s;
  s.node_index.resize(size_t(h.depth()));
  for (int l = 0; l < h.depth(); ++l) s.node_index[size_t(l)].assign(h.levels[size_t(l)].size(), 0);
  // Sibling sets top-down: (level, nodes, parent index or -1).
  auto choose = [&](int l, const std::vector<int>& sibs, int parent_idx) {
    std::vector<Vec> logits;
    for (int g : sibs) logits.push_back(controller_.forward(inputs[size_t(l)][size_t(g)]));
    if (joint && sibs.size() > 1) {
      std::vector<Vec> add(sibs.size(), Vec(size_t(n_windows_), 0.0));
      for (size_t a = 0; a < sibs.size(); ++a)
        for (size_t b = a + 1; b < sibs.size(); ++b) {
          const Vec& ua = inputs[size_t(l)][size_t(sibs[a])];
          const Vec& ub = inputs[size_t(l)][size_t(sibs[b])];
          Vec x(ua);
          x.insert(x.end(), ub.begin(), ub.end());
          for (int d = 0; d < kControllerInputs; ++d) x.push_back(ua[size_t(d)] - ub[size_t(d)]);
          const Vec y = joint_.forward(x);
          for (int k = 0; k < n_windows_; ++k) {
            add[a][size_t(k)] += y[size_t(k)];
            add[b][size_t(k)] += y[size_t(n_windows_ + k)];
          }
        }
      for (size_t a = 0; a < sibs.size(); ++a)
        for (int k = 0; k < n_windows_; ++k) logits[a][size_t(k)] += add[a][size_t(k)] / double(sibs.size() - 1);
    }
    for (size_t a = 0; a < sibs.size(); ++a) {
      int idx = int(std::max_element(logits[a].begin(), logits[a].end()) - logits[a].begin());
      if (parent_constraint && parent_idx >= 0) idx = std::min(idx, parent_idx);
      s.node_index[size_t(l)][size_t(sibs[a])] = idx;
    }
  };
  const int top = h.depth() - 1;
  std::vector<int> top_nodes(h.levels[size_t(top)].size());
  for (size_t g = 0; g < top_nodes.size(); ++g) top_nodes[g] = int(g);
  choose(top, top_nodes, -1);
  for (int l = top; l >= 1; --l)
    for (int p = 0; p < int(h.levels[size_t(l)].size()); ++p)
      choose(l - 1, h.levels[size_t(l)][size_t(p)], s.node_index[size_t(l)][size_t(p)]);
  s.head_index.assign(heads.size(), 0);
  for (int g = 0; g < int(h.levels[0].size()); ++g)
    for (int head : h.levels[0][size_t(g)]) s.head_index[size_t(head)] = s.node_index[0][size_t(g)];
  return s;
}

}  // namespace hw::aah

#pragma once
// Test fixture: a random layer (ref::Layer, per-head dense tensors) and its packed form for the
// entry point (fused QKV by LayerLayout, parameter buffers, workspace).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/dense_reference.hpp"
#include "headwise/attention/attention.hpp"

namespace fx {

using hw::attn::HeadKind;
using hw::attn::HeadSpec;

inline HeadSpec spec(const char* s) { return HeadSpec::parse(s); }

inline ref::Layer make_layer(const std::vector<HeadSpec>& plan, int KV, int D, int64_t B, int64_t T, unsigned seed,
                             double eps = 1e-6) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  ref::Layer l;
  l.plan = plan;
  l.H = static_cast<int>(plan.size());
  l.KV = KV;
  l.D = D;
  l.B = B;
  l.T = T;
  l.eps = eps;
  auto randm = [&](double sd) {
    ref::Mat m(size_t(T * D));
    for (auto& x : m) x = sd * nd(gen);
    return m;
  };
  l.q.assign(size_t(B), {});
  l.k.assign(size_t(B), {});
  l.v.assign(size_t(B), {});
  for (int64_t b = 0; b < B; ++b) {
    for (int h = 0; h < l.H; ++h) l.q[size_t(b)].push_back(randm(1.0));
    for (int g = 0; g < KV; ++g) {
      l.k[size_t(b)].push_back(randm(1.0));
      l.v[size_t(b)].push_back(randm(1.0));
    }
  }
  const int64_t n_pos = T + 3;  // parameters may be longer than the sequence
  l.alpha.assign(size_t(l.H), {});
  l.rho = l.alpha;
  l.L = l.alpha;
  l.groups.assign(size_t(l.H), {});
  l.G.assign(size_t(l.H), 0);
  for (int h = 0; h < l.H; ++h) {
    for (int64_t j = 0; j < n_pos; ++j) {
      l.alpha[size_t(h)].push_back(0.7 * nd(gen));
      l.rho[size_t(h)].push_back(0.7 * nd(gen) - 0.05 * double(j));
    }
    const int G = 1 + h % std::min(3, D);  // vary G over heads
    l.G[size_t(h)] = G;
    const int G1 = G + 1;
    for (int a = 0; a < G1; ++a)
      for (int c = 0; c < G1; ++c)  // upper triangle holds junk: it must be ignored
        l.L[size_t(h)].push_back(c > a ? 7.5 : (a == c ? 1.0 : 0.0) + 0.4 * nd(gen));
    for (int r = 0; r < D; ++r) l.groups[size_t(h)].push_back(1 + static_cast<int32_t>(gen() % unsigned(G)));
  }
  // baselines: Gaussian projections (the exactness tests need no orthogonality), log-weights, tau
  l.W.assign(size_t(l.H), {});
  l.log_w.assign(size_t(l.H), {});
  l.tau.assign(size_t(l.H), 0.0);
  for (int h = 0; h < l.H; ++h) {
    const int M = plan[size_t(h)].kind == HeadKind::Performer ? plan[size_t(h)].features : 0;
    for (int e = 0; e < M * D; ++e) l.W[size_t(h)].push_back(nd(gen));
    for (int f = 0; f < D; ++f) l.log_w[size_t(h)].push_back(0.5 * nd(gen));
    l.tau[size_t(h)] = 1.5 + 0.5 * nd(gen);
  }
  return l;
}

template <class F>
struct Packed {
  hw::attn::LayerPlan plan;
  hw::attn::LayerLayout layout;
  hw::attn::AttnDims dims;
  std::vector<F> qkv, out, stats, ws, dqkv, dout;
  std::vector<std::vector<F>> alpha, rho, log_z, dalpha, drho, L, dL;
  std::vector<std::vector<int32_t>> groups;
  std::vector<std::vector<F>> Wf, log_w, dlog_w;  // performer features, dijiang weights
  std::vector<F> tau, dtau;
  hw::attn::LayerHeadParams<F> params;

  explicit Packed(const ref::Layer& l) {
    plan = l.plan;
    layout = hw::attn::LayerLayout::build(plan, l.H, l.KV, l.D);
    dims = {l.B, l.T};
    const int64_t N = l.B * l.T, W = layout.qkv_width(), D = l.D;
    qkv.assign(size_t(N * W), std::numeric_limits<F>::quiet_NaN());
    for (int64_t b = 0; b < l.B; ++b)
      for (int64_t t = 0; t < l.T; ++t) {
        F* row = &qkv[size_t((b * l.T + t) * W)];
        for (int h = 0; h < l.H; ++h)
          if (layout.q_slot[size_t(h)] >= 0)
            for (int d = 0; d < D; ++d) row[layout.q_col(h) + d] = F(l.q[size_t(b)][size_t(h)][size_t(t * D + d)]);
        for (int g = 0; g < l.KV; ++g) {
          if (layout.k_slot[size_t(g)] >= 0)
            for (int d = 0; d < D; ++d) row[layout.k_col(g) + d] = F(l.k[size_t(b)][size_t(g)][size_t(t * D + d)]);
          if (layout.v_slot[size_t(g)] >= 0)
            for (int d = 0; d < D; ++d) row[layout.v_col(g) + d] = F(l.v[size_t(b)][size_t(g)][size_t(t * D + d)]);
        }
      }
    out.assign(size_t(N * layout.out_width()), F(0));
    dout = out;
    stats.assign(size_t(hw::attn::row_stats_size(layout, dims)), F(0));
    ws.assign(size_t(hw::attn::workspace_size(plan, layout, dims, hw::attn::attention_threads())), F(0));
    dqkv.assign(qkv.size(), F(0));
    for (int h = 0; h < l.H; ++h) {
      auto cvt = [](const std::vector<double>& x) { return std::vector<F>(x.begin(), x.end()); };
      alpha.push_back(cvt(l.alpha[size_t(h)]));
      rho.push_back(cvt(l.rho[size_t(h)]));
      log_z.push_back(cvt(ref::static_log_z(l.alpha[size_t(h)], l.rho[size_t(h)], int64_t(l.alpha[size_t(h)].size()))));
      dalpha.emplace_back(alpha.back().size(), F(0));
      drho.emplace_back(rho.back().size(), F(0));
      L.push_back(cvt(l.L[size_t(h)]));
      dL.emplace_back(L.back().size(), F(0));
      groups.push_back(l.groups[size_t(h)]);
      Wf.push_back(cvt(l.W[size_t(h)]));
      log_w.push_back(cvt(l.log_w[size_t(h)]));
      dlog_w.emplace_back(log_w.back().size(), F(0));
    }
    tau.assign(l.tau.begin(), l.tau.end());
    dtau.assign(tau.size(), F(0));
    params.linear_eps = l.eps;
    for (int h = 0; h < l.H; ++h) {
      params.statics.push_back({alpha[size_t(h)].data(), rho[size_t(h)].data(), log_z[size_t(h)].data(),
                                dalpha[size_t(h)].data(), drho[size_t(h)].data()});
      params.linears.push_back({L[size_t(h)].data(), dL[size_t(h)].data(), groups[size_t(h)].data(), l.G[size_t(h)]});
      params.performers.push_back({Wf[size_t(h)].data(), int(Wf[size_t(h)].size()) / l.D});
      params.dijiangs.push_back({log_w[size_t(h)].data(), dlog_w[size_t(h)].data()});
      params.taylorshifts.push_back({&tau[size_t(h)], &dtau[size_t(h)]});
    }
  }

  void forward() {
    hw::attn::layer_forward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), ws.data());
  }
  void backward() {
    hw::attn::layer_backward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), dout.data(),
                             dqkv.data(), ws.data());
  }
  F& out_at(int64_t b, int h, int64_t t, int d) {
    return out[size_t((b * dims.T + t) * layout.out_width() + layout.out_col(h) + d)];
  }
  F& dout_at(int64_t b, int h, int64_t t, int d) {
    return dout[size_t((b * dims.T + t) * layout.out_width() + layout.out_col(h) + d)];
  }
  F& dqkv_at(int64_t b, int64_t t, int64_t col) { return dqkv[size_t((b * dims.T + t) * layout.qkv_width() + col)]; }
  F& qkv_at(int64_t b, int64_t t, int64_t col) { return qkv[size_t((b * dims.T + t) * layout.qkv_width() + col)]; }
};

// Random upstream gradient R[b][h] (T x D), zero for pruned heads.
inline std::vector<std::vector<ref::Mat>> random_r(const ref::Layer& l, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<std::vector<ref::Mat>> R(size_t(l.B), std::vector<ref::Mat>(size_t(l.H), ref::Mat(size_t(l.T * l.D), 0.0)));
  for (auto& rb : R)
    for (size_t h = 0; h < rb.size(); ++h)
      if (l.plan[h].kind != HeadKind::Pruned)
        for (auto& x : rb[h]) x = nd(gen);
  return R;
}

}  // namespace fx

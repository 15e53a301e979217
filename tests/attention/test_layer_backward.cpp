// layer_backward: against central finite differences of f = sum(out * R) computed with
// layer_forward in double (q, k, v, alpha, rho, L), and against the dense reference's
// hand-derived gradients (which are themselves checked against finite differences here).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "attention/layer_fixture.hpp"
#include "headwise/core/error.hpp"
#include "support/central_difference.hpp"
#include "support/rel_err.hpp"

namespace {

using Grid = std::vector<std::vector<ref::Mat>>;

std::vector<fx::HeadSpec> mixed() {
  return {fx::spec("softmax"), fx::spec("window:70"), fx::spec("sink_window:3:40"),
          fx::spec("static"),  fx::spec("linear"),    fx::spec("pruned")};
}

// f = sum over present heads of <out, R>, through the entry point
double objective(fx::Packed<double>& p, const ref::Layer& l, const Grid& R) {
  p.forward();
  double f = 0;
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      if (l.plan[size_t(h)].kind != fx::HeadKind::Pruned)
        for (int64_t t = 0; t < l.T; ++t)
          for (int d = 0; d < l.D; ++d) f += p.out_at(b, h, t, d) * R[size_t(b)][size_t(h)][size_t(t * l.D + d)];
  return f;
}

// f through the dense reference
double ref_objective(const ref::Layer& l, const Grid& R) {
  const Grid out = ref::forward(l);
  double f = 0;
  for (size_t b = 0; b < out.size(); ++b)
    for (size_t h = 0; h < out[b].size(); ++h)
      for (size_t i = 0; i < out[b][h].size(); ++i) f += out[b][h][i] * R[b][h][i];
  return f;
}

void set_dout(fx::Packed<double>& p, const ref::Layer& l, const Grid& R) {
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      if (l.plan[size_t(h)].kind != fx::HeadKind::Pruned)
        for (int64_t t = 0; t < l.T; ++t)
          for (int d = 0; d < l.D; ++d) p.dout_at(b, h, t, d) = R[size_t(b)][size_t(h)][size_t(t * l.D + d)];
}

bool close(double got, double want, double tol) { return std::abs(got - want) <= tol * std::max(1.0, std::abs(want)); }

// Refresh a static head's log-normalisers after alpha/rho changed (with the reference's formula).
void refresh_log_z(fx::Packed<double>& p, int h) {
  const auto z = ref::static_log_z(p.alpha[size_t(h)], p.rho[size_t(h)], int64_t(p.alpha[size_t(h)].size()));
  std::copy(z.begin(), z.end(), p.log_z[size_t(h)].begin());
}

// Compare every gradient of layer_backward with central differences of the entry point's
// forward; `stride` thins the QKV entries checked (1 = all).
void check_against_fd(const ref::Layer& l, int stride, unsigned seed) {
  const Grid R = fx::random_r(l, seed);
  fx::Packed<double> p(l);
  set_dout(p, l, R);
  p.forward();
  std::fill(p.dqkv.begin(), p.dqkv.end(), std::nan(""));
  p.backward();
  const fx::Packed<double> grads = p;  // snapshot of dqkv, dalpha, drho, dL
  const double h = 1e-5, tol = 1e-6;
  int checked = 0;
  const int64_t n_qkv = int64_t(p.qkv.size());
  for (int64_t e = seed % unsigned(stride); e < n_qkv; e += stride) {
    const double fd = hw::test::central_difference(p.qkv[size_t(e)], [&] { return objective(p, l, R); }, h);
    INFO("qkv element " << e << " (column " << e % p.layout.qkv_width() << ")");
    CHECK(close(grads.dqkv[size_t(e)], fd, tol));
    ++checked;
  }
  CHECK(checked > 0);
  for (int hd = 0; hd < l.H; ++hd) {
    const auto kind = l.plan[size_t(hd)].kind;
    if (kind == fx::HeadKind::Static) {
      for (int which = 0; which < 2; ++which) {
        auto& x = which == 0 ? p.alpha[size_t(hd)] : p.rho[size_t(hd)];
        const auto& g = which == 0 ? grads.dalpha[size_t(hd)] : grads.drho[size_t(hd)];
        for (size_t j = 0; j < x.size(); ++j) {
          const double fd = hw::test::central_difference(x[j], [&] {
            refresh_log_z(p, hd);
            return objective(p, l, R);
          }, h);
          refresh_log_z(p, hd);
          INFO("head " << hd << (which == 0 ? " alpha[" : " rho[") << j << "]");
          CHECK(close(g[j], fd, tol));  // entries >= T: no effect, zero gradient
        }
      }
    }
    if (kind == fx::HeadKind::Linear) {
      auto& L = p.L[size_t(hd)];
      for (size_t e = 0; e < L.size(); ++e) {
        const double fd = hw::test::central_difference(L[e], [&] { return objective(p, l, R); }, h);
        INFO("head " << hd << " L[" << e << "]");
        CHECK(close(grads.dL[size_t(hd)][e], fd, tol));  // upper triangle: 0 both ways
      }
    }
  }
}

}  // namespace

TEST_CASE("layer_backward matches finite differences: every input, T = 7, MHA and GQA") {
  for (int KV : {6, 3, 1}) {
    INFO("KV=" << KV);
    check_against_fd(fx::make_layer(mixed(), KV, 4, 2, 7, 100u + unsigned(KV)), 1, 3u);
  }
}

TEST_CASE("layer_backward matches finite differences across tile boundaries (T = 67, 130)") {
  for (int64_t T : {67, 130}) {
    INFO("T=" << T);
    check_against_fd(fx::make_layer(mixed(), 2, 4, 1, T, 200u + unsigned(T)), 11, 5u);
  }
}

TEST_CASE("the dense reference's gradients match finite differences of the dense forward") {
  ref::Layer l = fx::make_layer(mixed(), 3, 4, 1, 9, 300u);
  const Grid R = fx::random_r(l, 8u);
  const ref::Grads g = ref::backward(l, R);
  const double h = 1e-5, tol = 1e-6;
  auto fd = [&](double& x) { return hw::test::central_difference(x, [&] { return ref_objective(l, R); }, h); };
  for (int hd = 0; hd < l.H; ++hd)
    for (size_t i = 0; i < l.q[0][size_t(hd)].size(); i += 3) CHECK(close(g.dq[0][size_t(hd)][i], fd(l.q[0][size_t(hd)][i]), tol));
  for (int kv = 0; kv < l.KV; ++kv)
    for (size_t i = 0; i < l.k[0][size_t(kv)].size(); i += 3) {
      CHECK(close(g.dk[0][size_t(kv)][i], fd(l.k[0][size_t(kv)][i]), tol));
      CHECK(close(g.dv[0][size_t(kv)][i], fd(l.v[0][size_t(kv)][i]), tol));
    }
  for (size_t j = 0; j < size_t(l.T); ++j) {
    CHECK(close(g.dalpha[3][j], fd(l.alpha[3][j]), tol));
    CHECK(close(g.drho[3][j], fd(l.rho[3][j]), tol));
  }
  for (size_t e = 0; e < l.L[4].size(); ++e) {
    const size_t G1 = size_t(l.G[4] + 1);
    if (e % G1 <= e / G1) CHECK(close(g.dL[4][e], fd(l.L[4][e]), tol));
  }
}

TEST_CASE("layer_backward matches the dense reference gradients, overwrites dQKV, accumulates parameters") {
  const std::vector<std::vector<const char*>> plans = {
      {"softmax", "window:70", "sink_window:3:40", "static", "linear", "pruned"},
      {"linear", "static", "window:200", "sink_window:300:4"},
      {"pruned", "pruned", "static", "static"},
      {"sink_window:70:5", "window:64", "linear", "softmax"}};
  for (const auto& kinds : plans)
    for (int KV : {1, 2}) {
      std::vector<fx::HeadSpec> plan;
      for (const char* k : kinds) plan.push_back(fx::spec(k));
      for (int64_t T : {1, 7, 67, 130}) {
        INFO("plan " << kinds[0] << "... KV=" << KV << " T=" << T);
        const ref::Layer l = fx::make_layer(plan, KV, 8, 2, T, 400u + unsigned(T));
        const Grid R = fx::random_r(l, 9u);
        const ref::Grads want = ref::backward(l, R);
        fx::Packed<double> p(l);
        set_dout(p, l, R);
        p.forward();
        std::fill(p.dqkv.begin(), p.dqkv.end(), std::nan(""));  // every column must be written
        for (auto& v : p.dalpha) std::fill(v.begin(), v.end(), 0.5);
        for (auto& v : p.drho) std::fill(v.begin(), v.end(), -0.25);
        for (auto& v : p.dL) std::fill(v.begin(), v.end(), 0.125);
        p.backward();
        const auto& lay = p.layout;
        double err = 0;
        const size_t D = size_t(l.D);
        for (int64_t b = 0; b < l.B; ++b)
          for (int64_t t = 0; t < T; ++t)
            for (int d = 0; d < l.D; ++d) {
              const size_t at = size_t(t) * D + size_t(d);
              const auto& dq = want.dq[size_t(b)];
              const auto& dk = want.dk[size_t(b)];
              const auto& dv = want.dv[size_t(b)];
              for (int h = 0; h < l.H; ++h)
                if (lay.q_slot[size_t(h)] >= 0)
                  err = hw::test::worse(err, hw::test::abs_err(p.dqkv_at(b, t, lay.q_col(h) + d), dq[size_t(h)][at]));
              for (int g = 0; g < l.KV; ++g) {
                if (lay.k_slot[size_t(g)] >= 0)
                  err = hw::test::worse(err, hw::test::abs_err(p.dqkv_at(b, t, lay.k_col(g) + d), dk[size_t(g)][at]));
                if (lay.v_slot[size_t(g)] >= 0)
                  err = hw::test::worse(err, hw::test::abs_err(p.dqkv_at(b, t, lay.v_col(g) + d), dv[size_t(g)][at]));
              }
            }
        CHECK(err < 1e-9);
        for (double x : p.dqkv) REQUIRE(std::isfinite(x));
        for (int h = 0; h < l.H; ++h) {
          const auto kind = plan[size_t(h)].kind;
          for (size_t j = 0; j < p.dalpha[size_t(h)].size(); ++j) {
            const bool has = kind == fx::HeadKind::Static && j < size_t(T);
            CHECK(p.dalpha[size_t(h)][j] == Approx(0.5 + (has ? want.dalpha[size_t(h)][j] : 0.0)).margin(1e-10));
            CHECK(p.drho[size_t(h)][j] == Approx(-0.25 + (has ? want.drho[size_t(h)][j] : 0.0)).margin(1e-10));
          }
          const size_t G1 = size_t(l.G[size_t(h)] + 1);
          for (size_t e = 0; e < p.dL[size_t(h)].size(); ++e) {
            const bool lower = e % G1 <= e / G1;
            const double g = kind == fx::HeadKind::Linear && lower ? want.dL[size_t(h)][e] : 0.0;
            CHECK(p.dL[size_t(h)][e] == Approx(0.125 + g).margin(1e-9));
          }
        }
      }
    }
}

TEST_CASE("layer_backward in float agrees with the double reference and is deterministic") {
  const ref::Layer l = fx::make_layer(mixed(), 2, 8, 2, 130, 500u);
  const Grid R = fx::random_r(l, 10u);
  const ref::Grads want = ref::backward(l, R);
  fx::Packed<float> p(l);
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      if (l.plan[size_t(h)].kind != fx::HeadKind::Pruned)
        for (int64_t t = 0; t < l.T; ++t)
          for (int d = 0; d < l.D; ++d) p.dout_at(b, h, t, d) = float(R[size_t(b)][size_t(h)][size_t(t * l.D + d)]);
  p.forward();
  p.backward();
  const auto first = p.dqkv;
  const auto first_dL = p.dL;
  p.backward();
  CHECK(p.dqkv == first);  // bitwise: fixed order everywhere
  double err = 0;
  for (int64_t b = 0; b < l.B; ++b)
    for (int64_t t = 0; t < l.T; ++t)
      for (int d = 0; d < l.D; ++d)
        for (int g = 0; g < l.KV; ++g)
          if (p.layout.v_slot[size_t(g)] >= 0) {
            const double w = want.dv[size_t(b)][size_t(g)][size_t(t * l.D + d)];
            const double e = hw::test::abs_err(p.dqkv_at(b, t, p.layout.v_col(g) + d), w);
            err = hw::test::worse(err, hw::test::ratio(e, std::max(1.0, std::abs(w))));
          }
  CHECK(err < 5e-5);
  for (size_t e = 0; e < first_dL[4].size(); ++e) CHECK(p.dL[4][e] == Approx(2 * first_dL[4][e]).epsilon(1e-6).margin(1e-6));
}

TEST_CASE("layer_backward without parameter gradients still gives dQKV") {
  const ref::Layer l = fx::make_layer(mixed(), 3, 4, 1, 67, 600u);
  const Grid R = fx::random_r(l, 11u);
  const ref::Grads want = ref::backward(l, R);
  fx::Packed<double> p(l);
  for (auto& s : p.params.statics) s.dalpha = s.drho = nullptr;
  for (auto& s : p.params.linears) s.dL = nullptr;
  set_dout(p, l, R);
  p.forward();
  p.backward();
  const int g = l.kv_of(3);  // the static head's V block
  for (int64_t t = 0; t < l.T; ++t)
    for (int d = 0; d < l.D; ++d)
      CHECK(p.dqkv_at(0, t, p.layout.v_col(g) + d) == Approx(want.dv[0][size_t(g)][size_t(t * l.D + d)]).margin(1e-10));
}

// The GEMM-chunked linear kind for every group count G = 1..5 and G = head_dim, MHA and GQA:
// outputs, dQ/dK/dV and dL against the dense per-pair reference (dense_reference.hpp) in
// double, across chunk boundaries.
#include <catch2/catch.hpp>

#include <cmath>

#include "attention/layer_fixture.hpp"
#include "support/rel_err.hpp"

namespace {

double rel(const std::vector<double>& a, const std::vector<double>& b) { return hw::test::max_rel_err_floor(a, b, 1.0); }

void check_groups(int KV, int64_t T, unsigned seed) {
  const int D = 8;
  const std::vector<int> Gs = {1, 2, 3, 4, 5, D};
  std::vector<fx::HeadSpec> plan(Gs.size(), fx::spec("linear"));
  ref::Layer l = fx::make_layer(plan, KV, D, 2, T, seed);
  for (size_t h = 0; h < Gs.size(); ++h) {
    const int G = Gs[h], G1 = G + 1;
    l.G[h] = G;
    l.L[h].assign(size_t(G1 * G1), 0.0);
    for (int a = 0; a < G1; ++a)
      for (int c = 0; c < G1; ++c) l.L[h][size_t(a * G1 + c)] = c > a ? 5.0 : (a == c ? 0.8 : 0.35 * std::cos(a + 2.0 * c + double(h)));
    for (int r = 0; r < D; ++r) l.groups[h][size_t(r)] = 1 + (r * 3 + int(h)) % G;  // every group non-empty
  }
  const auto R = fx::random_r(l, seed + 7);
  fx::Packed<double> p(l);
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) p.dout_at(b, h, t, d) = R[size_t(b)][size_t(h)][size_t(t * D + d)];
  p.forward();
  p.backward();
  const auto want = ref::forward(l);
  const auto g = ref::backward(l, R);
  for (int64_t b = 0; b < l.B; ++b) {
    for (int h = 0; h < l.H; ++h) {
      INFO("KV " << KV << " T " << T << " head " << h << " G " << Gs[size_t(h)] << " sequence " << b);
      std::vector<double> out, dq;
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) {
          out.push_back(p.out_at(b, h, t, d));
          dq.push_back(p.dqkv_at(b, t, p.layout.q_col(h) + d));
        }
      CHECK(rel(out, want[size_t(b)][size_t(h)]) <= 1e-11);
      CHECK(rel(dq, g.dq[size_t(b)][size_t(h)]) <= 1e-10);
    }
    for (int kv = 0; kv < KV; ++kv) {
      INFO("KV head " << kv << " sequence " << b);
      std::vector<double> dk, dv;
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) {
          dk.push_back(p.dqkv_at(b, t, p.layout.k_col(kv) + d));
          dv.push_back(p.dqkv_at(b, t, p.layout.v_col(kv) + d));
        }
      CHECK(rel(dk, g.dk[size_t(b)][size_t(kv)]) <= 1e-10);
      CHECK(rel(dv, g.dv[size_t(b)][size_t(kv)]) <= 1e-10);
    }
  }
  for (int h = 0; h < l.H; ++h) {
    const int G1 = Gs[size_t(h)] + 1;
    std::vector<double> dL, ref_dL;
    for (int r = 0; r < G1; ++r)
      for (int c = 0; c <= r; ++c) {
        dL.push_back(p.dL[size_t(h)][size_t(r * G1 + c)]);
        ref_dL.push_back(g.dL[size_t(h)][size_t(r * G1 + c)]);
      }
    INFO("dL of head " << h);
    CHECK(rel(dL, ref_dL) <= 1e-10);
  }
}

}  // namespace

TEST_CASE("linear kind, every G = 1..5 and G = head_dim, MHA and GQA: equals the dense reference") {
  for (int KV : {6, 3, 2, 1})
    for (int64_t T : {5, 64, 131}) check_groups(KV, T, 400u + unsigned(KV * 10) + unsigned(T));
}

// The GPU linear-head chunk math (include/headwise/kernels/tiles/linear_chunk.hpp) chained
// serially over chunks and feature blocks, exactly in the order the device code runs it,
// against the CPU entry point (attn::layer_forward / layer_backward) and the dense
// per-pair reference (tests/attention/dense_reference.hpp): outputs, denominators, dQ, dK,
// dV and dL, in double and float, for T not a multiple of the chunk, several group counts and
// the device's head dims (64 and 128; 16 for the fast sweep).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "support/rel_err.hpp"

namespace {

using namespace hw::tiles;

template <class F>
struct HeadIn {
  int D = 0, G1 = 0;
  int64_t T = 0;
  F eps = F(0);
  std::vector<F> q, k, v, L;  // T x D rows
  std::vector<int32_t> groups;
};

template <class F>
std::vector<F> weights(const HeadIn<F>& h) {
  const F rs = F(1) / std::sqrt(F(h.D));
  std::vector<F> w(size_t(linear_feature_slots(h.D)));
  for (size_t f = 0; f < w.size(); ++f)
    w[f] = linear_weight(linear_feature(h.D, int(f)), h.L.data(), h.G1, h.groups.data(), h.eps, rs);
  return w;
}

// U rows [v_j, 1] of chunk t0 (zero past n).
template <class F>
void load_u(std::vector<F>& U, const HeadIn<F>& h, int64_t t0, int n) {
  const int D = h.D;
  std::fill(U.begin(), U.end(), F(0));
  for (int j = 0; j < n; ++j) {
    for (int e = 0; e < D; ++e) U[size_t(j * (D + 1) + e)] = h.v[size_t((t0 + j) * D + e)];
    U[size_t(j * (D + 1) + D)] = F(1);
  }
}

template <class F>
void chunked_forward(const HeadIn<F>& h, std::vector<F>& out, std::vector<F>& den_out) {
  const int D = h.D, C = kLinChunk, fb = linear_feature_block(D), NF = linear_feature_slots(D);
  const int ldu = D + 1, ld = C + 1;
  const std::vector<F> w = weights(h);
  std::vector<F> S(size_t(NF * ldu), F(0)), U(size_t(C * ldu)), PsiT(size_t(fb * ld)), PhiT(size_t(fb * ld));
  std::vector<F> acc(size_t(C * D)), den(static_cast<size_t>(C)), Kap(size_t(C * C));
  out.assign(size_t(h.T * D), F(0));
  den_out.assign(size_t(h.T), F(0));
  for (int64_t t0 = 0; t0 < h.T; t0 += C) {
    const int n = int(std::min<int64_t>(C, h.T - t0));
    load_u(U, h, t0, n);
    std::fill(acc.begin(), acc.end(), F(0));
    std::fill(den.begin(), den.end(), F(0));
    std::fill(Kap.begin(), Kap.end(), F(0));
    for (int f0 = 0; f0 < NF; f0 += fb) {
      F* Sb = S.data() + f0 * ldu;
      linear_chunk_features(PsiT.data(), PhiT.data(), ld, D, f0, fb, w.data(), h.q.data() + t0 * D,
                            h.k.data() + t0 * D, D, n, C);
      linear_chunk_inter(acc.data(), D, den.data(), PsiT.data(), ld, Sb, ldu, fb, D, C);
      linear_chunk_kappa(Kap.data(), C, PsiT.data(), PhiT.data(), ld, fb, C);
      linear_state_update(Sb, ldu, PhiT.data(), ld, U.data(), ldu, fb, D, n);
    }
    linear_chunk_intra(acc.data(), D, den.data(), Kap.data(), C, U.data(), ldu, D, n);
    for (int i = 0; i < n; ++i) {
      for (int e = 0; e < D; ++e) out[size_t((t0 + i) * D + e)] = acc[size_t(i * D + e)] / den[size_t(i)];
      den_out[size_t(t0 + i)] = den[size_t(i)];
    }
  }
}

template <class F>
struct HeadGrads {
  std::vector<F> dq, dk, dv, A;
};

template <class F>
HeadGrads<F> chunked_backward(const HeadIn<F>& h, const std::vector<F>& out, const std::vector<F>& dout,
                              const std::vector<F>& den) {
  const int D = h.D, C = kLinChunk, fb = linear_feature_block(D), NF = linear_feature_slots(D), G1 = h.G1;
  const int ldu = D + 1, ld = C + 1;
  const int64_t T = h.T;
  const std::vector<F> w = weights(h);
  std::vector<F> S(size_t(NF * ldu), F(0)), Tt(size_t(NF), F(0)), U(size_t(C * ldu)), G(size_t(C * ldu));
  std::vector<F> PA(size_t(fb * ld)), PB(size_t(fb * ld)), dX(size_t(fb * ld)), dKT(size_t(C * ld));
  std::vector<F> dxc(size_t(C * D)), dU(size_t(C * D)), Kap(size_t(C * C));
  HeadGrads<F> g;
  g.dq.assign(size_t(T * D), F(0));
  g.dk = g.dq;
  g.dv = g.dq;
  auto load_chunk = [&](int64_t t0, int n) {
    load_u(U, h, t0, n);
    linear_chunk_grad_rows(G.data(), ldu, out.data() + t0 * D, dout.data() + t0 * D, D, den.data() + t0, D, n, C);
    linear_chunk_dkappa(dKT.data(), ld, G.data(), ldu, U.data(), ldu, D, n, C);
  };
  // pass 1: prefix state -> dq and the totals
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    const int n = int(std::min<int64_t>(C, T - t0));
    load_chunk(t0, n);
    std::fill(dxc.begin(), dxc.end(), F(0));
    for (int f0 = 0; f0 < NF; f0 += fb) {
      F* Sb = S.data() + f0 * ldu;
      linear_chunk_features(PA.data(), PB.data(), ld, D, f0, fb, static_cast<const F*>(nullptr),
                            h.q.data() + t0 * D, h.k.data() + t0 * D, D, n, C);
      linear_chunk_dpsi(dX.data(), ld, Sb, ldu, G.data(), ldu, PB.data(), ld, dKT.data(), ld, fb, D, C);
      linear_state_update(Sb, ldu, PB.data(), ld, U.data(), ldu, fb, D, n);
      linear_totals_update(Tt.data() + f0, dX.data(), ld, PA.data(), ld, fb, C);
      linear_chunk_jacobian(dxc.data(), D, D, f0, fb, dX.data(), ld, w.data() + f0, h.q.data() + t0 * D, D, n);
    }
    std::copy(dxc.begin(), dxc.begin() + n * D, g.dq.begin() + t0 * D);
  }
  // pass 2: suffix state -> dk, dv
  std::fill(S.begin(), S.end(), F(0));
  for (int64_t t0 = (T - 1) / C * C; t0 >= 0 && T > 0; t0 -= C) {
    const int n = int(std::min<int64_t>(C, T - t0));
    load_chunk(t0, n);
    std::fill(dxc.begin(), dxc.end(), F(0));
    std::fill(dU.begin(), dU.end(), F(0));
    std::fill(Kap.begin(), Kap.end(), F(0));
    for (int f0 = 0; f0 < NF; f0 += fb) {
      F* Rb = S.data() + f0 * ldu;
      linear_chunk_features(PA.data(), PB.data(), ld, D, f0, fb, w.data(), h.q.data() + t0 * D, h.k.data() + t0 * D,
                            D, n, C);
      linear_chunk_dphi(dX.data(), ld, Rb, ldu, U.data(), ldu, PA.data(), ld, dKT.data(), ld, fb, D, C);
      linear_chunk_du_inter(dU.data(), D, PB.data(), ld, Rb, ldu, fb, D, C);
      linear_chunk_kappa(Kap.data(), C, PA.data(), PB.data(), ld, fb, C);
      linear_suffix_update(Rb, ldu, PA.data(), ld, G.data(), ldu, fb, D, n);
      linear_chunk_jacobian(dxc.data(), D, D, f0, fb, dX.data(), ld, static_cast<const F*>(nullptr),
                            h.k.data() + t0 * D, D, n);
    }
    linear_chunk_du_intra(dU.data(), D, Kap.data(), C, G.data(), ldu, D, n);
    std::copy(dxc.begin(), dxc.begin() + n * D, g.dk.begin() + t0 * D);
    std::copy(dU.begin(), dU.begin() + n * D, g.dv.begin() + t0 * D);
  }
  // A from the totals
  const F rs = F(1) / std::sqrt(F(D));
  std::vector<F> Brow(size_t(D * G1), F(0));
  for (int r = 0; r < D; ++r)
    for (int y = 1; y < G1; ++y) Brow[size_t(r * G1 + y)] = linear_A_rowsum(D, Tt.data(), h.groups.data(), r, y);
  g.A.assign(size_t(G1 * G1), F(0));
  for (int x = 0; x < G1; ++x)
    for (int y = 0; y < G1; ++y)
      g.A[size_t(x * G1 + y)] = linear_A_entry(D, Tt.data(), Brow.data(), G1, h.groups.data(), rs, x, y);
  return g;
}

// max |a - b| / max(max |b|, 1): one relative error per tensor, robust to entries near zero.
// The inputs are O(1), so the floor only matters for tensors that are zero in exact
// arithmetic (dq, dk and dL at T = 1, where every weight is 1), where it is an absolute bound.
template <class A, class B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  REQUIRE(a.size() == b.size());
  return hw::test::max_rel_err_floor(a, b, 1.0);  // a NaN or an infinity on either side: infinite
}

template <class F>
HeadIn<F> head_of(const ref::Layer& l, int64_t b, int h) {
  HeadIn<F> x;
  x.D = l.D;
  x.T = l.T;
  x.G1 = l.G[size_t(h)] + 1;
  x.eps = F(l.eps);
  auto cvt = [](const std::vector<double>& v) { return std::vector<F>(v.begin(), v.end()); };
  x.q = cvt(l.q[size_t(b)][size_t(h)]);
  x.k = cvt(l.k[size_t(b)][size_t(l.kv_of(h))]);
  x.v = cvt(l.v[size_t(b)][size_t(l.kv_of(h))]);
  x.L = cvt(l.L[size_t(h)]);
  x.groups = l.groups[size_t(h)];
  return x;
}

// One layer of `H` linear heads (head h has h + 1 groups), B sequences: the chained chunk math
// against the dense reference in double (tolerance `tol`) and against the CPU entry point in F
// (tolerance `tol_cpu`: in float both sides carry their own rounding; the CPU's float dL, an
// accumulation over all pairs, is itself up to 1.5e-5 off the double reference).
template <class F>
void check_layer(int D, int H, int64_t B, int64_t T, unsigned seed, double tol, double tol_cpu) {
  std::vector<fx::HeadSpec> plan(size_t(H), fx::spec("linear"));
  ref::Layer l = fx::make_layer(plan, H, D, B, T, seed);
  for (int h = 0; h < H; ++h) {  // make_layer caps G at 3; spread the dims over h + 1 groups
    l.G[size_t(h)] = h + 1;
    const int G1 = h + 2;
    l.L[size_t(h)].assign(size_t(G1 * G1), 0.0);
    for (int a = 0; a < G1; ++a)
      for (int c = 0; c < G1; ++c)
        l.L[size_t(h)][size_t(a * G1 + c)] = c > a ? 9.0 : (a == c ? 0.9 : 0.3 * std::sin(1.7 * a + c + h));
    for (int r = 0; r < D; ++r) l.groups[size_t(h)][size_t(r)] = 1 + (r * 7 + h) % (h + 1);
  }
  const auto R = fx::random_r(l, seed + 1);
  fx::Packed<F> p(l);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) p.dout_at(b, h, t, d) = F(R[size_t(b)][size_t(h)][size_t(t * D + d)]);
  p.forward();
  p.backward();
  const auto ref_out = ref::forward(l);
  const auto ref_g = ref::backward(l, R);

  for (int h = 0; h < H; ++h) {
    const int G1 = l.G[size_t(h)] + 1;
    std::vector<F> A_sum(size_t(G1 * G1), F(0));
    for (int64_t b = 0; b < B; ++b) {
      INFO("D " << D << " T " << T << " head " << h << " (G " << G1 - 1 << ") sequence " << b);
      const HeadIn<F> in = head_of<F>(l, b, h);
      std::vector<F> out, den;
      chunked_forward(in, out, den);
      // the CPU entry point's blocks of this (b, h)
      std::vector<F> cpu_out(size_t(T * D)), cpu_den(static_cast<size_t>(T)), cpu_dq(size_t(T * D)), cpu_dk(size_t(T * D)),
          cpu_dv(size_t(T * D)), dout(size_t(T * D));
      for (int64_t t = 0; t < T; ++t) {
        cpu_den[size_t(t)] = p.stats[size_t((b * H + h) * T + t)];
        for (int d = 0; d < D; ++d) {
          const size_t e = size_t(t * D + d);
          cpu_out[e] = p.out_at(b, h, t, d);
          dout[e] = p.dout_at(b, h, t, d);
          cpu_dq[e] = p.dqkv_at(b, t, p.layout.q_col(h) + d);
          cpu_dk[e] = p.dqkv_at(b, t, p.layout.k_col(h) + d);
          cpu_dv[e] = p.dqkv_at(b, t, p.layout.v_col(h) + d);
        }
      }
      CHECK(rel_err(out, cpu_out) <= tol_cpu);
      CHECK(rel_err(den, cpu_den) <= tol_cpu);
      CHECK(rel_err(out, ref_out[size_t(b)][size_t(h)]) <= tol);

      const HeadGrads<F> g = chunked_backward(in, out, dout, den);
      CHECK(rel_err(g.dq, cpu_dq) <= tol_cpu);
      CHECK(rel_err(g.dk, cpu_dk) <= tol_cpu);
      CHECK(rel_err(g.dv, cpu_dv) <= tol_cpu);
      CHECK(rel_err(g.dq, ref_g.dq[size_t(b)][size_t(h)]) <= tol);
      CHECK(rel_err(g.dk, ref_g.dk[size_t(b)][size_t(h)]) <= tol);
      CHECK(rel_err(g.dv, ref_g.dv[size_t(b)][size_t(h)]) <= tol);
      for (size_t e = 0; e < A_sum.size(); ++e) A_sum[e] += g.A[e];
    }
    // dL = 2 A L_low over the lower triangle, against the entry point and the dense reference
    std::vector<F> dL, cpu_dL;
    std::vector<double> ref_dL;
    for (int r = 0; r < G1; ++r)
      for (int c = 0; c <= r; ++c) {
        dL.push_back(linear_dL_entry(A_sum.data(), p.L[size_t(h)].data(), G1, r, c));
        cpu_dL.push_back(p.dL[size_t(h)][size_t(r * G1 + c)]);
        ref_dL.push_back(ref_g.dL[size_t(h)][size_t(r * G1 + c)]);
      }
    INFO("dL of head " << h << ", D " << D << " T " << T);
    CHECK(rel_err(dL, cpu_dL) <= tol_cpu);
    CHECK(rel_err(dL, ref_dL) <= tol);
  }
}

}  // namespace

TEST_CASE("linear feature slots cover every feature exactly once and invert linear_pair_slot") {
  for (int D : {2, 8, 16, 64, 128}) {
    INFO("D " << D);
    const int NF = linear_feature_slots(D), fb = linear_feature_block(D);
    CHECK(NF % fb == 0);
    CHECK(D % fb == 0);
    CHECK(linear_head_slots(D) % fb == 0);
    int n_const = 0, n_pad = 0;
    std::vector<int> single(size_t(D), 0), pair(size_t(D * D), 0);
    for (int f = 0; f < NF; ++f) {
      const LinFeature ft = linear_feature(D, f);
      if (ft.kind == kLinConst) ++n_const;
      if (ft.kind == kLinPad) ++n_pad;
      if (ft.kind == kLinSingle) {
        ++single[size_t(ft.r)];
        CHECK(linear_single_slot(ft.r) == f);
      }
      if (ft.kind == kLinPair) {
        REQUIRE(ft.r <= ft.c);
        REQUIRE(ft.c < D);
        ++pair[size_t(ft.r * D + ft.c)];
        CHECK(linear_pair_slot(D, ft.r, ft.c) == f);
      }
    }
    CHECK(n_const == 1);
    CHECK(n_pad == NF - 1 - D - D * (D + 1) / 2);
    for (int r = 0; r < D; ++r) {
      CHECK(single[size_t(r)] == 1);
      for (int c = 0; c < D; ++c) CHECK(pair[size_t(r * D + c)] == (r <= c ? 1 : 0));
    }
  }
}

TEST_CASE("linear features reproduce the kernel: sum_f psi_f(q) phi_f(k) = eps + ||L^T s||^2") {
  const ref::Layer l = fx::make_layer({fx::spec("linear"), fx::spec("linear"), fx::spec("linear")}, 3, 16, 1, 5, 61u);
  for (int h = 0; h < 3; ++h) {
    const HeadIn<double> in = head_of<double>(l, 0, h);
    const std::vector<double> w = weights(in);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        std::vector<double> s, t;
        const double want = ref::oal_kernel(l, h, &in.q[size_t(i * 16)], &in.k[size_t(j * 16)], s, t);
        double got = 0;
        for (int f = 0; f < linear_feature_slots(16); ++f) {
          const LinFeature ft = linear_feature(16, f);
          got += w[size_t(f)] * linear_x(ft, &in.q[size_t(i * 16)]) * linear_x(ft, &in.k[size_t(j * 16)]);
        }
        CHECK(got == Approx(want).epsilon(1e-12));
      }
  }
}

TEST_CASE("linear chunks chained equal the CPU entry point and the dense reference (double)") {
  for (int64_t T : {1, 7, 64, 100, 257}) check_layer<double>(16, 3, 2, T, 70u + unsigned(T), 1e-10, 1e-10);
  check_layer<double>(64, 2, 1, 70, 81u, 1e-10, 1e-10);
  check_layer<double>(128, 1, 1, 40, 82u, 1e-10, 1e-10);
}

TEST_CASE("linear chunks chained equal the CPU entry point and the dense reference (float)") {
  for (int64_t T : {1, 7, 64, 100, 257}) check_layer<float>(16, 3, 2, T, 90u + unsigned(T), 1e-5, 2e-5);
  check_layer<float>(64, 2, 1, 70, 91u, 1e-5, 2e-5);
}

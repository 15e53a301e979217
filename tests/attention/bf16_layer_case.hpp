#pragma once
// One attention layer on bf16 activations against the double reference, whoever runs it: the
// CUDA kernels on a GPU (tests/cuda/attention_bf16_util.hpp) or the same device code in the CPU
// block emulator (tests/emulated). Prepares the values both sides see, and checks a run's
// outputs per head and KV group.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "attention/layer_fixture.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "support/rel_err.hpp"

namespace hw::attn_case {

using hw::bf16;

inline constexpr double kTol = 1e-2;

inline double round_bf16(double x) { return hw::to_float(hw::to_bf16(static_cast<float>(x))); }
inline double round_f32(double x) { return static_cast<float>(x); }

inline void round_all(std::vector<double>& v, double (*round)(double)) {
  for (double& x : v) x = round(x);
}

inline std::vector<bf16> as_bf16(const std::vector<double>& v) {  // v already holds bf16 values
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = hw::to_bf16(static_cast<float>(v[i]));
  return out;
}
inline std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = hw::to_float(v[i]);
  return out;
}
inline std::vector<bf16> bf16_nans(int64_t n) { return std::vector<bf16>(size_t(n), hw::to_bf16(NAN)); }
inline std::vector<float> float_nans(int64_t n) { return std::vector<float>(size_t(n), NAN); }

inline bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

// max |got - ref| / max |ref| over rows x [col, col + width) of row-major [rows, ld] arrays;
// the scale is at least 5% of the whole array's, since a block whose exact value is 0 (the dQ
// of a window:1 head, where P = 1) holds only rounding noise. With zero_exact, a block whose
// reference is exactly zero (a static head's row statistics) must be exactly zero.
inline double block_err(const std::vector<float>& got, const std::vector<double>& ref, int64_t rows, int64_t ld,
                        int64_t col, int64_t width, bool zero_exact = false) {
  using hw::test::abs_err, hw::test::bigger_scale, hw::test::worse;
  double scale = 0, err = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const size_t i = static_cast<size_t>(r * ld + c);
      scale = bigger_scale(scale, ref[i]);
      err = worse(err, abs_err(double(got[i]), ref[i]));
    }
  if (zero_exact && scale == 0) return err == 0 ? 0 : INFINITY;
  double whole = 0;
  for (double x : ref) whole = bigger_scale(whole, x);
  scale = bigger_scale(scale, 0.05 * whole);
  return hw::test::ratio(err, scale);
}

using hw::test::max_rel_err;

// What one forward + backward of a layer on bf16 activations hands back: out, row_stats, dqkv
// and the linear heads' dL.
struct LayerRun {
  std::vector<bf16> out, dqkv;
  std::vector<float> stats;
  std::vector<std::vector<float>> dL;
};

// One layer prepared for a bf16 run (GPU or emulated) against the double reference: the values both sides
// see (bf16 activations and output gradients, float head parameters, dL starting non-zero), the
// reference forward's outputs, and the backward's inputs as a bf16 forward hands them on (out
// rounded to bf16, statistics to float). A run copies ref->dL, so call ref->backward() after it.
struct Bf16Case {
  std::vector<hw::attn::HeadSpec> plan;
  int H = 0, KV = 0;
  std::unique_ptr<fx::Packed<double>> ref;  // owns pointers into itself: never copied
  std::vector<std::vector<double>> dL_init;
  std::vector<double> out_ref, stats_ref;
  std::vector<bf16> qkv, out_in, dout;
  std::vector<float> stats_in;
};

inline Bf16Case prepare_case(const std::vector<std::string>& names, int kv, int D, int64_t T, int64_t B,
                             unsigned seed) {
  Bf16Case c;
  for (const auto& s : names) c.plan.push_back(fx::spec(s.c_str()));
  const ref::Layer layer = fx::make_layer(c.plan, kv, D, B, T, seed);
  c.H = layer.H;
  c.KV = layer.KV;
  c.ref = std::make_unique<fx::Packed<double>>(layer);
  fx::Packed<double>& ref = *c.ref;
  const hw::attn::LayerLayout& lay = ref.layout;
  round_all(ref.qkv, round_bf16);
  for (size_t h = 0; h < c.plan.size(); ++h) {
    round_all(ref.alpha[h], round_f32);
    round_all(ref.rho[h], round_f32);
    round_all(ref.log_z[h], round_f32);
    round_all(ref.L[h], round_f32);
    for (size_t i = 0; i < ref.dL[h].size(); ++i) ref.dL[h][i] = round_f32(0.01 * double(i % 7) - 0.02);
  }
  for (auto& s : ref.params.statics) s.dalpha = s.drho = nullptr;  // the GPU computes none
  const auto R = fx::random_r(layer, seed + 1);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < c.H; ++h)
      if (lay.o_slot[size_t(h)] >= 0)
        for (int64_t t = 0; t < T; ++t)
          for (int d = 0; d < D; ++d) ref.dout_at(b, h, t, d) = round_bf16(R[size_t(b)][size_t(h)][size_t(t * D + d)]);
  c.dL_init = ref.dL;
  ref.forward();
  c.out_ref = ref.out;
  c.stats_ref = ref.stats;
  round_all(ref.out, round_bf16);
  round_all(ref.stats, round_f32);
  c.qkv = as_bf16(ref.qkv);
  c.out_in = as_bf16(ref.out);
  c.dout = as_bf16(ref.dout);
  c.stats_in.assign(ref.stats.begin(), ref.stats.end());
  return c;
}

// Per element of linear head h's dL (G1 x G1, row-major), a bound on |dL_run - dL_ref| derived
// from the arithmetic of the bf16 kernels (src/kernels/cuda/attention_linear.cuh; linear_dL_block
// in attention_softmax_backward.cuh) for the inputs both sides share (bf16 q, k, v, dO and out;
// fp32 den = row_stats and L). What the kernels compute, in exact arithmetic:
//   dkappa_ij = G_i . U_j  (j <= i),  G_i = [dO_i, -(dO_i . O_i)] / den_i,  U_j = [v_j, 1];
//   T_f = sum_i X_f(q_i) dX_fi,  dX_fi = S_f(chunk of i) . G_i + sum_{j <= i, same chunk} Phi_fj dkappa_ij,
//   S_f(c) = sum_{j in earlier chunks} Phi_fj U_j,  Phi_fj = X_f(k_j)   (state, D + 1 columns),
//   A[x][y] = sum_f kappa_f T_f over the features f of the group pair {x, y},
//   dL[r][c] += 2 sum_{e >= c} A[r][e] L[e][c] on the lower triangle (the upper one is never
//   written: it must stay dL_init exactly),
// with the features X_f = 1, x_a, x_a x_b (a <= b) of headwise/kernels/tiles/linear_chunk.hpp,
// products of bf16 values and so exact in fp32, and kappa_f = 1, rs, rs^2 (2 rs^2 for a < b in
// one group), rs = 1/sqrt(D). So dL is linear in the T_f: dL[r][c] = sum_f w_f T_f.
// The tf32 tensor-core products round four kinds of operand once each (cvt.rna, relative error
// delta with |delta| <= u = 2^-11); everything else is fp32. Each rounding site s adds delta_s c_s
// to dL[r][c] (first order), with c_s:
//   1. Phi_fj (the same rounded value in the state S and in Phi dKappa): w_f Phi_fj Y_fj,
//      Y_fj = sum_{i >= j} dkappa_ij X_f(q_i)  (Phi's error reaches dX through S G as U_j . G_i);
//   2. S_fd(c) as an operand of S G:  w_f S_fd(c) R_fd(c),  R_fd(c) = sum_{i in chunk c} G_id X_f(q_i);
//   3. G_id (shared by all features): G_id sum_f w_f S_fd(chunk of i) X_f(q_i);
//   4. dKappa_ij (same chunk): dkappa_ij sum_f w_f X_f(q_i) Phi_fj = dkappa_ij 2 sum_{e >= c}
//      L[e][c] s_r s_e, with s_0 = 1, s_x = rs sum_{a in x} q_ia k_ja.
// The cancelling sums make a worst-case bound (u sum_s |c_s|) useless here: it sits 10^3 to 10^4
// times above the errors the kernels make, and would pass dL doubled. The standard probabilistic
// model (Higham and Mary, "A new approach to probabilistic rounding error analysis", 2019)
// takes the delta_s independent and of mean zero; then by Hoeffding's inequality
//   |sum_s delta_s c_s| <= lambda u sqrt(sum_s c_s^2)  except with probability 2 exp(-lambda^2 / 2),
// lambda = 6: at most 3e-8 per element (a few hundred elements are checked); a site known only
// to be bounded, |delta_s c_s| <= b_s, enters the same sum with b_s / u for c_s. fp32 roundings
// (2^-24, 2^13 times finer) matter only where a sum cancels below its terms before it is rounded
// to tf32 or used, which is where dkappa is formed (0 exactly when O_i = v_j, as at T = 1):
//   5. dKappa_ij in fp32, v_j . dO_i - dO_i . O_i over D products each, times 1 / den_i: an
//      error of at most (D + 3) 2^-24 m_ij, m_ij = (sum_d |v_jd dO_id| + sum_d |dO_id O_id|) / den_i;
//      c_s as in 4 with that for delta_s dkappa_ij;
//   6. dX_fi = S_f . G_i accumulated in fp32 over D + 1 products: at most (D + 1) 2^-24
//      sum_d |S_fd G_id|, times w_f X_f(q_i).
// The other fp32 partial sums (the state over j, the totals over i, A over features, 2 A L) are
// of the size of the rounded operands they produce; at most n = 2T + 4D + C + G1 + B of them on
// any path add at most a factor 1 + sqrt(n) 2^-13 (under 1.006 here) in the same model. The
// final fp32 add to dL_init adds 2^-24 |dL|. The reference itself is double arithmetic: worst
// case n 2^-53 of the magnitudes it sums, 2 sum_{e >= c} M[r][e] |L[e][c]| with M[x][y] =
// sum_{j <= i} m_ij t_x t_y, m_ij = (sum_d |v_jd dO_id| + sum_d |dO_id O_id|) / den_i, t_0 = 1,
// t_x = rs sum_{a in x} |q_ia k_ja| (negligible, except where dL's increment is exactly 0, T = 1).
// The emulator rounds exactly like the GPU (host tf32_round, IEEE fp32); check_case's GPU
// callers have no linear heads. Measured on the emulated cases: error / bound at most 0.21 (the
// model predicts about 1 / (lambda sqrt(3)) ~ 0.1 typical), and the bound is about 1% of max |dL|:
// scaling the largest element by 1.01 exceeds it in 12 of the 15 linear-head runs.
inline std::vector<double> linear_dL_bound(const Bf16Case& c, int h) {
  const fx::Packed<double>& ref = *c.ref;
  const auto& lay = ref.layout;
  const int64_t B = ref.dims.B, T = ref.dims.T, W = lay.qkv_width(), O = lay.out_width();
  const int D = lay.head_dim, H = c.H, g = lay.kv_head_of(h), C = hw::tiles::kLinChunk, D1 = D + 1;
  const int G1 = ref.params.linears[size_t(h)].n_groups + 1;
  const std::vector<int32_t>& groups = ref.groups[size_t(h)];
  const std::vector<double>& L = ref.L[size_t(h)];
  const double rs = 1.0 / std::sqrt(double(D));
  // Features, grouped by their unordered group pair {x <= y} (bucket x * G1 + y).
  struct Feat {
    int a = -1, b = -1;  // const: -1, -1; single: a, -1; pair: a, b
    int bucket = 0;
    double kappa = 1;
  };
  std::vector<Feat> feats;
  feats.push_back({-1, -1, 0, 1.0});
  for (int a = 0; a < D; ++a) feats.push_back({a, -1, groups[size_t(a)], rs});
  for (int a = 0; a < D; ++a)
    for (int b = a; b < D; ++b) {
      const int x = std::min(groups[size_t(a)], groups[size_t(b)]), y = std::max(groups[size_t(a)], groups[size_t(b)]);
      feats.push_back({a, b, x * G1 + y, (a < b && x == y ? 2.0 : 1.0) * rs * rs});
    }
  std::stable_sort(feats.begin(), feats.end(), [](const Feat& p, const Feat& q) { return p.bucket < q.bucket; });
  const size_t NF = feats.size(), NB = size_t(G1 * G1);
  auto feature = [&](const Feat& f, const double* x) {
    return f.a < 0 ? 1.0 : (f.b < 0 ? x[f.a] : x[f.a] * x[f.b]);
  };
  // Wb[e][bucket]: dL element e = r * G1 + c's weight on A's bucket {x, y} (w_f = kappa_f Wb).
  std::vector<std::vector<double>> Wb(NB, std::vector<double>(NB, 0.0));
  for (int r = 0; r < G1; ++r)
    for (int col = 0; col <= r; ++col)
      for (int x = 0; x < G1; ++x)
        for (int y = x; y < G1; ++y) {
          double w = 0;
          if (x == r && y >= col) w += 2 * L[size_t(y * G1 + col)];
          if (y == r && x >= col && x != y) w += 2 * L[size_t(x * G1 + col)];
          Wb[size_t(r * G1 + col)][size_t(x * G1 + y)] = w;
        }
  std::vector<double> Zf(NF, 0.0), Z34(NB, 0.0);  // sites 1 + 2 per feature; sites 3 + 4 per element
  std::vector<double> Xq(size_t(T) * NF), Phi(size_t(T) * NF), G(size_t(T * D1)), U(size_t(T * D1));
  std::vector<double> Rs(NF * size_t(D1)), S(NF * size_t(D1)), Rc(NF * size_t(D1)), acc(NB * size_t(D1));
  std::vector<double> odabs(static_cast<size_t>(T));
  const double r32 = std::ldexp(1.0, -24) / std::ldexp(1.0, -11);  // fp32 sites in units of u
  auto dkappa = [&](int64_t i, int64_t j) {
    double s = 0;
    for (int d = 0; d < D1; ++d) s += G[size_t(i * D1 + d)] * U[size_t(j * D1 + d)];
    return s;
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const double* q = &ref.qkv[size_t((b * T + t) * W + lay.q_col(h))];
      const double* k = &ref.qkv[size_t((b * T + t) * W + lay.k_col(g))];
      const double* v = &ref.qkv[size_t((b * T + t) * W + lay.v_col(g))];
      const double* o = &ref.out[size_t((b * T + t) * O + lay.out_col(h))];
      const double* dout = &ref.dout[size_t((b * T + t) * O + lay.out_col(h))];
      const double den = ref.stats[size_t(b * H * T + h * T + t)];
      double od = 0, oda = 0;
      for (int d = 0; d < D; ++d) {
        od += dout[d] * o[d];
        oda += std::fabs(dout[d] * o[d]);
        G[size_t(t * D1 + d)] = dout[d] / den;
        U[size_t(t * D1 + d)] = v[d];
      }
      G[size_t(t * D1 + D)] = -od / den;
      odabs[size_t(t)] = oda / den;
      U[size_t(t * D1 + D)] = 1.0;
      for (size_t f = 0; f < NF; ++f) {
        Xq[size_t(t) * NF + f] = feature(feats[f], q);
        Phi[size_t(t) * NF + f] = feature(feats[f], k);
      }
    }
    // Site 1, keys last to first: Rs = sum_{i >= j} X_f(q_i) G_i, Y_fj = Rs_f . U_j.
    std::fill(Rs.begin(), Rs.end(), 0.0);
    for (int64_t j = T - 1; j >= 0; --j) {
      for (size_t f = 0; f < NF; ++f) {
        const double xf = Xq[size_t(j) * NF + f];
        double* r = &Rs[f * size_t(D1)];
        double y = 0;
        for (int d = 0; d < D1; ++d) {
          r[d] += xf * G[size_t(j * D1 + d)];
          y += r[d] * U[size_t(j * D1 + d)];
        }
        const double cf = Phi[size_t(j) * NF + f] * y;
        Zf[f] += cf * cf;
      }
    }
    // Sites 2 and 3, chunks first to last with the exclusive prefix state S; site 4 in the chunk.
    std::fill(S.begin(), S.end(), 0.0);
    std::vector<double> s(static_cast<size_t>(G1));
    for (int64_t t0 = 0; t0 < T; t0 += C) {
      const int64_t t1 = std::min<int64_t>(T, t0 + C);
      std::fill(Rc.begin(), Rc.end(), 0.0);
      for (int64_t i = t0; i < t1; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (size_t f = 0; f < NF; ++f) {
          const double xf = Xq[size_t(i) * NF + f], kx = feats[f].kappa * xf;
          const double* sf = &S[f * size_t(D1)];
          double* rc = &Rc[f * size_t(D1)];
          double* a = &acc[size_t(feats[f].bucket) * size_t(D1)];
          double sg = 0;  // site 6
          for (int d = 0; d < D1; ++d) {
            rc[d] += xf * G[size_t(i * D1 + d)];
            a[d] += kx * sf[d];
            sg += std::fabs(sf[d] * G[size_t(i * D1 + d)]);
          }
          const double c6 = xf * double(D1) * r32 * sg;
          Zf[f] += c6 * c6;
        }
        for (size_t e = 0; e < NB; ++e)
          for (int d = 0; d < D1; ++d) {
            double ce = 0;
            for (size_t bk = 0; bk < NB; ++bk) ce += Wb[e][bk] * acc[bk * size_t(D1) + size_t(d)];
            ce *= G[size_t(i * D1 + d)];
            Z34[e] += ce * ce;
          }
        for (int64_t j = t0; j <= i; ++j) {
          const double* q = &ref.qkv[size_t((b * T + i) * W + lay.q_col(h))];
          const double* k = &ref.qkv[size_t((b * T + j) * W + lay.k_col(g))];
          std::fill(s.begin(), s.end(), 0.0);
          s[0] = 1.0;
          for (int d = 0; d < D; ++d) s[size_t(groups[size_t(d)])] += rs * q[d] * k[d];
          const double* v = &ref.qkv[size_t((b * T + j) * W + lay.v_col(g))];
          double mij = 0;  // site 5: (sum_d |v_jd dO_id| + sum_d |dO_id O_id|) / den_i
          for (int d = 0; d < D; ++d) mij += std::fabs(v[d] * G[size_t(i * D1 + d)]);
          mij += std::fabs(odabs[size_t(i)]);
          const double dk = std::sqrt(dkappa(i, j) * dkappa(i, j) + std::pow(double(D + 3) * r32 * mij, 2));
          for (size_t e = 0; e < NB; ++e) {  // sites 4 and 5
            double ce = 0;
            for (int x = 0; x < G1; ++x)
              for (int y = x; y < G1; ++y) ce += Wb[e][size_t(x * G1 + y)] * s[size_t(x)] * s[size_t(y)];
            ce *= dk;
            Z34[e] += ce * ce;
          }
        }
      }
      for (size_t f = 0; f < NF; ++f)
        for (int d = 0; d < D1; ++d) {
          const double cf = S[f * size_t(D1) + size_t(d)] * Rc[f * size_t(D1) + size_t(d)];
          Zf[f] += cf * cf;
        }
      for (int64_t j = t0; j < t1; ++j)
        for (size_t f = 0; f < NF; ++f) {
          const double pf = Phi[size_t(j) * NF + f];
          double* sf = &S[f * size_t(D1)];
          for (int d = 0; d < D1; ++d) sf[d] += pf * U[size_t(j * D1 + d)];
        }
    }
  }
  // The reference's magnitudes M (last paragraph above).
  std::vector<double> M(NB, 0.0), t(static_cast<size_t>(G1));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const double* q = &ref.qkv[size_t((b * T + i) * W + lay.q_col(h))];
      const double* o = &ref.out[size_t((b * T + i) * O + lay.out_col(h))];
      const double* dout = &ref.dout[size_t((b * T + i) * O + lay.out_col(h))];
      double od = 0;
      for (int d = 0; d < D; ++d) od += std::fabs(dout[d] * o[d]);
      for (int64_t j = 0; j <= i; ++j) {
        const double* k = &ref.qkv[size_t((b * T + j) * W + lay.k_col(g))];
        const double* v = &ref.qkv[size_t((b * T + j) * W + lay.v_col(g))];
        double vd = 0;
        std::fill(t.begin(), t.end(), 0.0);
        t[0] = 1.0;
        for (int d = 0; d < D; ++d) {
          vd += std::fabs(v[d] * dout[d]);
          t[size_t(groups[size_t(d)])] += rs * std::fabs(q[d] * k[d]);
        }
        const double m = (vd + od) / ref.stats[size_t(b * H * T + h * T + i)];
        for (int x = 0; x < G1; ++x)
          for (int y = 0; y < G1; ++y) M[size_t(x * G1 + y)] += m * t[size_t(x)] * t[size_t(y)];
      }
    }
  const double lambda = 6, u = std::ldexp(1.0, -11), u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  const double n = double(2 * T + 4 * D + C + G1 + B), fp32 = 1 + std::sqrt(n) * std::ldexp(1.0, -13);
  const std::vector<double>& want = ref.dL[size_t(h)];
  std::vector<double> bound(NB, 0.0);
  for (int r = 0; r < G1; ++r)
    for (int col = 0; col <= r; ++col) {
      const size_t e = size_t(r * G1 + col);
      double var = Z34[e];
      for (size_t f = 0; f < NF; ++f) {
        const double w = feats[f].kappa * Wb[e][size_t(feats[f].bucket)];
        var += w * w * Zf[f];
      }
      double mag = 0;
      for (int x = col; x < G1; ++x) mag += 2 * M[size_t(r * G1 + x)] * std::fabs(L[size_t(x * G1 + col)]);
      bound[e] = lambda * u * std::sqrt(var) * fp32 + u32 * std::fabs(want[e]) + n * u64 * mag;
    }
  return bound;
}

// max over elements of |got - want| / bound: <= 1 when every element is within its bound; an
// element whose bound is 0 must match exactly, and a NaN or an infinity is an infinite error.
inline double bounded_err(const std::vector<float>& got, const std::vector<double>& want,
                          const std::vector<double>& bound) {
  if (got.size() != want.size() || bound.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    const double err = hw::test::abs_err(double(got[e]), want[e]);
    worst = hw::test::worse(worst, bound[e] > 0 ? err / bound[e] : (err == 0 ? 0.0 : INFINITY));
  }
  return worst;
}

// Run g of case c (after c.ref->backward()) against the reference: out, row_stats and dqkv
// within kTol as a whole and per head / KV-group column block the layout has (zero_exact: see
// block_err), each linear head's dL element by element within linear_dL_bound; then `rerun`
// gives the same bits.
inline void check_case(Bf16Case& c, const LayerRun& g, const std::vector<std::string>& names, bool zero_exact,
                       const std::function<LayerRun()>& rerun) {
  fx::Packed<double>& ref = *c.ref;
  const auto& lay = ref.layout;
  const int64_t B = ref.dims.B, T = ref.dims.T, N = B * T, W = lay.qkv_width(), O = lay.out_width();
  const int H = c.H, D = lay.head_dim;
  std::string where = "plan";
  for (const auto& s : names) where += " " + s;
  INFO(where << " kv " << c.KV << " D " << D << " T " << T << " B " << B);
  const std::vector<float> out = widen(g.out), dqkv = widen(g.dqkv);
  CHECK(max_rel_err(out, c.out_ref) <= kTol);
  CHECK(max_rel_err(g.stats, c.stats_ref) <= kTol);
  CHECK(max_rel_err(dqkv, ref.dqkv) <= kTol);
  for (int h = 0; h < H; ++h) {
    INFO("head " << h << " (" << names[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0) CHECK(block_err(out, c.out_ref, N, O, lay.out_col(h), D, zero_exact) <= kTol);
    CHECK(block_err(g.stats, c.stats_ref, B, H * T, h * T, T, zero_exact) <= kTol);
    if (lay.q_slot[size_t(h)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D, zero_exact) <= kTol);
    if (c.plan[size_t(h)].kind == hw::attn::HeadKind::Linear) {  // dL: within the bound of linear_dL_bound
      REQUIRE(size_t(h) < g.dL.size());
      const double e = bounded_err(g.dL[size_t(h)], ref.dL[size_t(h)], linear_dL_bound(c, h));
      INFO("dL error / bound " << e << ", max |dL - ref| / max |ref| "
                               << max_rel_err(g.dL[size_t(h)], ref.dL[size_t(h)]));
      CHECK(e <= 1.0);
    }
  }
  for (int grp = 0; grp < c.KV; ++grp) {
    INFO("kv group " << grp);
    if (lay.k_slot[size_t(grp)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.k_col(grp), D, zero_exact) <= kTol);
    if (lay.v_slot[size_t(grp)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.v_col(grp), D, zero_exact) <= kTol);
  }
  const LayerRun again = rerun();
  CHECK(same_bits(g.out, again.out));
  CHECK(same_bits(g.dqkv, again.dqkv));
  CHECK(std::memcmp(g.stats.data(), again.stats.data(), g.stats.size() * sizeof(float)) == 0);
}

}  // namespace hw::attn_case

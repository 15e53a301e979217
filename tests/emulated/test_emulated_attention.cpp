// The CUDA attention launchers and kernels (attention_launch.cu, attention_forward.cu,
// attention_backward.cu and the device code they include) run on the CPU block emulator,
// against the CPU reference: every head kind mixed in one layer, fp32 activations (the exact SIMT tiles) and
// bf16 activations (the tensor-core tiles, mma emulated per warp in double), T not a multiple
// of any tile. This is the GPU parity suite (tests/cuda) without a GPU: it checks indexing,
// masks, barriers, shared-memory carving and the item schedule; it cannot check timing,
// memory-model or compiler effects, which only tests/cuda on a GPU can.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "attention/bf16_layer_case.hpp"
#include "emulated/block_emulator.hpp"
#include "attention/layer_fixture.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "support/rel_err.hpp"

namespace {

using hw::attn_case::block_err;

struct Case {
  std::vector<std::string> plan;
  int kv = 1;
};

// The GPU parity cases (tests/cuda/test_attention_parity.cpp).
const std::vector<Case> kCases = {
    {{"softmax", "window:40", "sink_window:3:50", "static", "linear", "pruned", "softmax", "window:1"}, 4},
    {{"static", "linear", "softmax", "pruned", "window:100", "linear", "static", "sink_window:64:64"}, 2},
    {{"softmax", "softmax", "window:70", "sink_window:1:1"}, 1},
    {{"static", "static", "linear", "linear", "pruned", "pruned"}, 3},
};

std::vector<float> nans(int64_t n) { return std::vector<float>(static_cast<size_t>(n), NAN); }

std::string describe(const Case& cs, int D, int64_t T) {
  std::string s = "plan";
  for (const auto& h : cs.plan) s += " " + h;
  return s + " kv " + std::to_string(cs.kv) + " D " + std::to_string(D) + " T " + std::to_string(T);
}

// Per element of out and of the V columns of dqkv, a bound on the fp32 kernels' error, derived
// from their arithmetic. Both are weighted sums with weights p >= 0: out_i = sum_j p_ij v_j,
// dv_j = sum_{heads, i} p_ij dO_i, so nothing cancels but through the weights. Each element is
// one sum over at most n = D + T + 8 fp32 roundings (the logit's dot product over D, the sum over
// keys or queries in tiles with their rescales, the normalisation); in the probabilistic model
// (independent rounding errors of mean zero, |delta| <= u = 2^-24, Hoeffding) its error is at most
// lambda sqrt(n) u sum |terms|, lambda = 6 (failure probability 3e-8 per element), where the
// magnitudes are out_abs = sum_j p_ij |v_j| and dv_abs = sum p_ij |dO_i|: the double reference run
// again on |v| and |dO| (p does not depend on them). The weights' own error adds:
//   softmax family: p = exp(s - lse) with s = rs q . k in fp32: |delta p| <= 2 e_s p,
//     e_s = lambda sqrt(D) u max_ij rs sum_d |q_id k_jd| (the logit's error; lse carries the same);
//   static: s = alpha_j + rho_{i-j} - log_z_i: |delta p| <= 2 e_s p, e_s = 3 u max |alpha| + |rho| +
//     |log_z|;
//   linear: p = kappa / den with kappa a sum over NF = 1 + D + D (D + 1) / 2 features whose terms
//     total K_ij = eps + sum_xy |(L L^T)_xy| t_x t_y (t_0 = 1, t_x = rs sum_{r in x} |q_r k_r|):
//     |delta kappa_ij| <= lambda sqrt(NF + 8) u K_ij, and den = sum_j kappa_ij carries the sum of
//     those, so |delta p_ij| <= lambda sqrt(NF + T + 8) u (K_ij + p_ij sum_k K_ik) / den_i.
// Measured on these cases: error / bound at most 0.035 (out and dv); the 1e-4 these checks had
// (against max |block|) sat 60-80 times above their errors (1.6e-6 and 1.3e-6), and a uniform
// relative error of 2e-5, which it let pass, exceeds these bounds up to 6 times.
// dq, dk, dL and the statistics are held against the CPU backend's own fp32 error instead
// (cpu_relative below): their worst blocks are exact zeros or cancel (window:1 heads, where
// dS = p (dP - dO . O) vanishes; T = 1, where dL's increment is 0), so a bound from magnitudes
// alone would need both sides of each cancellation per head kind.
struct Fp32Bounds {
  std::vector<double> out, dqkv;  // like ref.out and ref.dqkv (V columns only; 0 elsewhere)
};
Fp32Bounds fp32_bounds(const ref::Layer& layer, const fx::Packed<double>& ref) {
  const auto& lay = ref.layout;
  const int64_t B = layer.B, T = layer.T, W = lay.qkv_width(), O = lay.out_width();
  const int D = layer.D, H = layer.H;
  const double u = std::ldexp(1.0, -24), lambda = 6, rs = 1.0 / std::sqrt(double(D));
  const double n = double(D + T + 8), NF = 1.0 + D + D * (D + 1) / 2.0;
  // The magnitude run: the same layer on |v| and |dO|.
  fx::Packed<double> mag(layer);
  for (auto& st : mag.params.statics) st.dalpha = st.drho = nullptr;
  mag.qkv = ref.qkv;
  for (int64_t r = 0; r < B * T; ++r)
    for (int g = 0; g < layer.KV; ++g)
      if (lay.v_slot[size_t(g)] >= 0)
        for (int d = 0; d < D; ++d) {
          const size_t vi = size_t(r * W + lay.v_col(g) + d);
          mag.qkv[vi] = std::fabs(ref.qkv[vi]);
        }
  for (size_t i = 0; i < ref.dout.size(); ++i) mag.dout[i] = std::fabs(ref.dout[i]);
  for (size_t h = 0; h < size_t(H); ++h) {
    mag.alpha[h] = ref.alpha[h];
    mag.rho[h] = ref.rho[h];
    mag.log_z[h] = ref.log_z[h];
    mag.L[h] = ref.L[h];
  }
  mag.forward();
  mag.backward();
  Fp32Bounds bd;
  bd.out.assign(ref.out.size(), 0.0);
  bd.dqkv.assign(ref.dqkv.size(), 0.0);
  std::vector<double> e_s(size_t(H), 0.0);  // softmax family and static: the logits' error
  for (int h = 0; h < H; ++h) {
    const auto& spec = ref.plan[size_t(h)];
    if (spec.kind == hw::attn::HeadKind::Static) {
      double ma = 0, mr = 0, mz = 0;
      for (size_t j = 0; j < size_t(T); ++j) {
        ma = std::max(ma, std::fabs(ref.alpha[size_t(h)][j]));
        mr = std::max(mr, std::fabs(ref.rho[size_t(h)][j]));
        mz = std::max(mz, std::fabs(ref.log_z[size_t(h)][j]));
      }
      e_s[size_t(h)] = 3 * u * (ma + mr + mz);
    } else if (spec.softmax_family()) {
      double m = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            double a = 0;
            for (int d = 0; d < D; ++d)
              a += std::fabs(ref.qkv[size_t((b * T + i) * W + lay.q_col(h) + d)] *
                             ref.qkv[size_t((b * T + j) * W + lay.k_col(lay.kv_head_of(h)) + d)]);
            m = std::max(m, rs * a);
          }
      e_s[size_t(h)] = lambda * std::sqrt(double(D)) * u * m;
    }
  }
  // Sums over the weights: out (per head) and dv (per KV group, over its heads).
  for (int h = 0; h < H; ++h) {
    const auto& spec = ref.plan[size_t(h)];
    if (lay.o_slot[size_t(h)] < 0) continue;
    const int g = lay.kv_head_of(h);
    const bool linear = spec.kind == hw::attn::HeadKind::Linear;
    for (int64_t b = 0; b < B; ++b) {
      // K_ij / den_i and p_ij for a linear head (the only kind whose weights' error is not
      // proportional to the weights).
      std::vector<double> Kd, P;
      if (linear) {
        Kd.assign(size_t(T * T), 0.0);
        P.assign(size_t(T * T), 0.0);
        const int G1 = layer.G[size_t(h)] + 1;
        const auto& Lh = ref.L[size_t(h)];
        for (int64_t i = 0; i < T; ++i) {
          const double den = ref.stats[size_t(b * H * T + h * T + i)];
          const double* q = &ref.qkv[size_t((b * T + i) * W + lay.q_col(h))];
          for (int64_t j = 0; j <= i; ++j) {
            const double* k = &ref.qkv[size_t((b * T + j) * W + lay.k_col(g))];
            std::vector<double> sv(static_cast<size_t>(G1), 0.0), t(static_cast<size_t>(G1), 0.0);
            sv[0] = t[0] = 1;
            for (int d = 0; d < D; ++d) {
              sv[size_t(layer.groups[size_t(h)][size_t(d)])] += rs * q[d] * k[d];
              t[size_t(layer.groups[size_t(h)][size_t(d)])] += rs * std::fabs(q[d] * k[d]);
            }
            double kap = layer.eps, K = layer.eps;
            for (int c = 0; c < G1; ++c) {
              double tc = 0;
              for (int a = c; a < G1; ++a) tc += Lh[size_t(a * G1 + c)] * sv[size_t(a)];
              kap += tc * tc;
            }
            for (int x = 0; x < G1; ++x)
              for (int y = 0; y < G1; ++y) {
                double gram = 0;
                for (int c = 0; c <= std::min(x, y); ++c) gram += Lh[size_t(x * G1 + c)] * Lh[size_t(y * G1 + c)];
                K += std::fabs(gram) * t[size_t(x)] * t[size_t(y)];
              }
            Kd[size_t(i * T + j)] = K / den;
            P[size_t(i * T + j)] = kap / den;
          }
        }
      }
      for (int64_t i = 0; i < T; ++i) {
        double ksum = 0;
        if (linear)
          for (int64_t j = 0; j <= i; ++j) ksum += Kd[size_t(i * T + j)];
        const double cw = lambda * std::sqrt(NF + double(T) + 8) * u;
        for (int d = 0; d < D; ++d) {
          const size_t oi = size_t((b * T + i) * O + lay.out_col(h) + d);
          double extra = 0;
          if (linear)
            for (int64_t j = 0; j <= i; ++j)
              extra += Kd[size_t(i * T + j)] * std::fabs(ref.qkv[size_t((b * T + j) * W + lay.v_col(g) + d)]);
          const double weights = linear ? cw * (extra + ksum * mag.out[oi]) : 2 * e_s[size_t(h)] * mag.out[oi];
          bd.out[oi] = lambda * std::sqrt(n) * u * mag.out[oi] + weights;
          // dv_j += this row's share: p_ij |dO_i| with its weights' error
          const double dO = std::fabs(ref.dout[oi]);
          for (int64_t j = 0; j <= i; ++j) {
            const size_t vi = size_t((b * T + j) * W + lay.v_col(g) + d);
            if (linear) bd.dqkv[vi] += cw * (Kd[size_t(i * T + j)] + P[size_t(i * T + j)] * ksum) * dO;
          }
        }
      }
    }
  }
  for (int g = 0; g < layer.KV; ++g) {
    if (lay.v_slot[size_t(g)] < 0) continue;
    double es = 0;  // the group's largest logit error (softmax family and static heads)
    for (int h = 0; h < H; ++h)
      if (lay.kv_head_of(h) == g) es = std::max(es, e_s[size_t(h)]);
    for (int64_t r = 0; r < B * T; ++r)
      for (int d = 0; d < D; ++d) {
        const size_t vi = size_t(r * W + lay.v_col(g) + d);
        bd.dqkv[vi] += (lambda * std::sqrt(n) * u + 2 * es) * mag.dqkv[vi];
      }
  }
  return bd;
}

// max over rows x [col, col + width) of |got - ref| / bound (bound 0: must be exact); a NaN or an
// infinity is an infinite error.
double block_bounded_err(const std::vector<float>& got, const std::vector<double>& ref,
                         const std::vector<double>& bound, int64_t rows, int64_t ld, int64_t col, int64_t width) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const size_t i = static_cast<size_t>(r * ld + c);
      const double e = hw::test::abs_err(double(got[i]), ref[i]);
      worst = hw::test::worse(worst, bound[i] > 0 ? e / bound[i] : (e == 0 ? 0.0 : INFINITY));
    }
  return worst;
}

// dq, dk, dL and the statistics: the CPU backend (fx::Packed<float>) evaluates the same sums in
// fp32 in another order (rows instead of 64-key tiles, which add at most T / 64 + 2 rescale
// roundings to a sum of D + T terms), so under the rounding model of fp32_bounds both errors
// are at most lambda sqrt(n) u times the sum of the magnitudes of the terms, n being the number
// of roundings one element sees: D + T + 8 for the softmax family and static heads, NF + T + 8
// for a linear head (its weights are sums over NF features). The kernel's block error (relative
// to the block's scale, as block_err measures) may therefore be kCpuFactor times the CPU's
// block error (both are maxima over >= 64 elements, which do not fluctuate 4x), plus
// 2 lambda sqrt(n) u for blocks the CPU gets exactly: where the exact values cancel to zero (T =
// 1 and window:1, dS = p (dP - dO . O) = 0) the CPU computes dP and dO . O by the same dot
// product and cancels exactly, while the kernel computes the two apart and keeps the
// difference of their roundings (two sums, each within lambda sqrt(n) u of its magnitude).
// Measured: kernel / (kCpuFactor cpu + 2 lambda sqrt(n) u) at most 0.51 over these cases; the
// 1e-4 these checks had sat 5-100 times above the kernel's errors.
constexpr double kCpuFactor = 4;
bool cpu_relative(double kernel_err, double cpu_err, double n) {
  const double u = std::ldexp(1.0, -24), lambda = 6;
  return kernel_err <= kCpuFactor * cpu_err + 2 * lambda * std::sqrt(n) * u;
}

// The roundings one element of a head's gradient sees (see cpu_relative).
double roundings(const hw::attn::HeadSpec& spec, int D, int64_t T) {
  const double NF = 1.0 + D + D * (D + 1) / 2.0;
  return (spec.kind == hw::attn::HeadKind::Linear ? NF : double(D)) + double(T) + 8;
}

// fp32: the emulated kernels against the double reference: out and dV within the bounds of
// fp32_bounds, the rest within cpu_relative of the CPU backend's error.
void run_fp32(const Case& cs, int D, int64_t T, int64_t B, unsigned seed) {
  std::vector<hw::attn::HeadSpec> plan;
  for (const auto& s : cs.plan) plan.push_back(fx::spec(s.c_str()));
  const ref::Layer layer = fx::make_layer(plan, cs.kv, D, B, T, seed);
  fx::Packed<double> ref(layer);
  for (auto& s : ref.params.statics) s.dalpha = s.drho = nullptr;
  for (auto& v : ref.dL)
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(0.01 * double(i % 7) - 0.02);
  const auto R = fx::random_r(layer, seed + 1);
  const hw::attn::LayerLayout& lay = ref.layout;
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < layer.H; ++h)
      if (lay.o_slot[size_t(h)] >= 0)
        for (int64_t t = 0; t < T; ++t)
          for (int d = 0; d < D; ++d) ref.dout_at(b, h, t, d) = float(R[size_t(b)][size_t(h)][size_t(t * D + d)]);
  for (double& x : ref.qkv) x = static_cast<float>(x);  // both sides see the same float inputs

  // The emulated side's parameters and activations, as floats.
  auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  std::vector<std::vector<float>> alpha, rho, log_z, L, dL;
  hw::attn::LayerHeadParams<float> params;
  params.linear_eps = static_cast<float>(ref.params.linear_eps);
  for (size_t h = 0; h < plan.size(); ++h) {
    alpha.push_back(to_f(ref.alpha[h]));
    rho.push_back(to_f(ref.rho[h]));
    log_z.push_back(to_f(ref.log_z[h]));
    L.push_back(to_f(ref.L[h]));
    dL.push_back(to_f(ref.dL[h]));
  }
  for (size_t h = 0; h < plan.size(); ++h) {
    params.statics.push_back({alpha[h].data(), rho[h].data(), log_z[h].data(), nullptr, nullptr});
    params.linears.push_back({L[h].data(), dL[h].data(), ref.groups[h].data(), ref.params.linears[h].n_groups});
  }
  for (size_t h = 0; h < plan.size(); ++h)  // the reference sees the float values too
    for (auto* v : {&ref.alpha[h], &ref.rho[h], &ref.log_z[h], &ref.L[h]})
      for (double& x : *v) x = static_cast<float>(x);
  const std::vector<float> qkv = to_f(ref.qkv), dout = to_f(ref.dout);
  const int64_t N = B * T, W = lay.qkv_width(), O = lay.out_width(), H = layer.H;
  std::vector<float> out = nans(N * O), stats = nans(B * H * T), dqkv = nans(N * W);
  std::vector<float> ws = nans(std::max<int64_t>(1, hw::cuda::attention_workspace_floats(ref.plan, lay, ref.dims)));

  // The CPU backend in fp32 on the same float inputs.
  fx::Packed<float> cpu(layer);
  std::copy(qkv.begin(), qkv.end(), cpu.qkv.begin());
  std::copy(dout.begin(), dout.end(), cpu.dout.begin());
  for (auto& st : cpu.params.statics) st.dalpha = st.drho = nullptr;
  for (size_t h = 0; h < plan.size(); ++h) {
    std::copy(alpha[h].begin(), alpha[h].end(), cpu.alpha[h].begin());
    std::copy(rho[h].begin(), rho[h].end(), cpu.rho[h].begin());
    std::copy(log_z[h].begin(), log_z[h].end(), cpu.log_z[h].begin());
    std::copy(L[h].begin(), L[h].end(), cpu.L[h].begin());
    std::copy(dL[h].begin(), dL[h].end(), cpu.dL[h].begin());
  }
  cpu.forward();
  cpu.backward();

  ref.forward();
  ref.backward();
  hw::cuda::launch_attention_forward(nullptr, ref.plan, lay, ref.dims, params, qkv.data(), out.data(), stats.data(),
                                     ws.data());
  hw::cuda::launch_attention_backward(nullptr, ref.plan, lay, ref.dims, params, qkv.data(), out.data(), stats.data(),
                                      dout.data(), dqkv.data(), ws.data());
  INFO(describe(cs, D, T));
  const Fp32Bounds bound = fp32_bounds(layer, ref);
  for (int h = 0; h < layer.H; ++h) {
    INFO("head " << h << " (" << cs.plan[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0)
      CHECK(block_bounded_err(out, ref.out, bound.out, N, O, lay.out_col(h), D) <= 1.0);
    const double stats_err = block_err(stats, ref.stats, B, H * T, h * T, T);
    CHECK(cpu_relative(stats_err, block_err(cpu.stats, ref.stats, B, H * T, h * T, T), roundings(plan[size_t(h)], D, T)));
    if (lay.q_slot[size_t(h)] >= 0) {
      const double dq_err = block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D);
      CHECK(cpu_relative(dq_err, block_err(cpu.dqkv, ref.dqkv, N, W, lay.q_col(h), D), roundings(plan[size_t(h)], D, T)));
    }
    if (plan[size_t(h)].kind == hw::attn::HeadKind::Linear && T > 1) {  // T = 1: dL's increment is 0 (noise)
      const int64_t n = int64_t(dL[size_t(h)].size());
      const double dL_err = block_err(dL[size_t(h)], ref.dL[size_t(h)], 1, n, 0, n);
      CHECK(cpu_relative(dL_err, block_err(cpu.dL[size_t(h)], ref.dL[size_t(h)], 1, n, 0, n), roundings(plan[size_t(h)], D, T)));
    }
  }
  for (int g = 0; g < layer.KV; ++g) {
    INFO("kv group " << g);
    if (lay.k_slot[size_t(g)] >= 0) {
      const double dk_err = block_err(dqkv, ref.dqkv, N, W, lay.k_col(g), D);
      double n = 0;  // the most roundings among the group's heads
      for (int h = 0; h < layer.H; ++h)
        if (lay.kv_head_of(h) == g) n = std::max(n, roundings(plan[size_t(h)], D, T));
      CHECK(cpu_relative(dk_err, block_err(cpu.dqkv, ref.dqkv, N, W, lay.k_col(g), D), n));
    }
    if (lay.v_slot[size_t(g)] >= 0)
      CHECK(block_bounded_err(dqkv, ref.dqkv, bound.dqkv, N, W, lay.v_col(g), D) <= 1.0);
  }
}

// bf16: the shared bf16 case (tests/attention/bf16_layer_case.hpp) through the emulator.
hw::attn_case::LayerRun run_bf16_emulated(const fx::Packed<double>& ref, const hw::attn_case::Bf16Case& c) {
  using hw::bf16;
  const auto& lay = ref.layout;
  const int64_t N = ref.dims.B * ref.dims.T;
  std::vector<std::vector<float>> keep;
  auto f = [&](const std::vector<double>& v) {
    keep.emplace_back(v.begin(), v.end());
    return keep.back().data();
  };
  keep.reserve(5 * ref.plan.size());
  hw::attn::LayerHeadParams<float> params;
  params.linear_eps = static_cast<float>(ref.params.linear_eps);
  hw::attn_case::LayerRun r;
  for (size_t h = 0; h < ref.plan.size(); ++h) {
    params.statics.push_back({f(ref.alpha[h]), f(ref.rho[h]), f(ref.log_z[h]), nullptr, nullptr});
    params.linears.push_back({f(ref.L[h]), f(c.dL_init[h]), ref.groups[h].data(), ref.params.linears[h].n_groups});
  }
  r.out = hw::attn_case::as_bf16(std::vector<double>(size_t(N * lay.out_width()), NAN));
  r.stats = nans(ref.dims.B * lay.n_head * ref.dims.T);
  r.dqkv = hw::attn_case::as_bf16(std::vector<double>(size_t(N * lay.qkv_width()), NAN));
  std::vector<float> ws = nans(std::max<int64_t>(1, hw::cuda::attention_workspace_floats(ref.plan, lay, ref.dims)));
  hw::cuda::launch_attention_forward(nullptr, ref.plan, lay, ref.dims, params, c.qkv.data(), r.out.data(),
                                     r.stats.data(), ws.data());
  hw::cuda::launch_attention_backward(nullptr, ref.plan, lay, ref.dims, params, c.qkv.data(), c.out_in.data(),
                                      c.stats_in.data(), c.dout.data(), r.dqkv.data(), ws.data());
  for (size_t h = 0; h < ref.plan.size(); ++h) r.dL.push_back(std::vector<float>(params.linears[h].dL,
                                                                                 params.linears[h].dL + ref.L[h].size()));
  return r;
}

// The rerun that must give the same bits runs every block's threads in reverse order, so a
// missing barrier cannot hide behind the emulator's fiber order.
void run_bf16(const Case& cs, int D, int64_t T, int64_t B, unsigned seed) {
  hw::attn_case::Bf16Case c = hw::attn_case::prepare_case(cs.plan, cs.kv, D, T, B, seed);
  c.ref->backward();
  const auto run = [&] { return run_bf16_emulated(*c.ref, c); };
  const auto rerun_reversed = [&] {
    const hw_emu::ReverseThreadOrder reversed;
    return run_bf16_emulated(*c.ref, c);
  };
  hw::attn_case::check_case(c, run(), cs.plan, /*zero_exact=*/false, rerun_reversed);
}

}  // namespace

// One test case per precision and head_dim, so that ctest can run them side by side.
TEST_CASE("emulated attention kernels: fp32 mixed head plans forward and backward head_dim 64") {
  unsigned seed = 100;
  for (int64_t T : {1, 65, 130})
    for (const Case& cs : kCases) run_fp32(cs, 64, T, 1, seed++);
}

TEST_CASE("emulated attention kernels: fp32 mixed head plans forward and backward head_dim 128") {
  unsigned seed = 200;
  for (int64_t T : {1, 65, 130})
    for (const Case& cs : kCases) run_fp32(cs, 128, T, 1, seed++);
}

TEST_CASE("emulated attention kernels: bf16 tensor-core tiles mixed head plans head_dim 64") {
  unsigned seed = 500;
  for (int64_t T : {1, 65, 130})
    for (const Case& cs : kCases) run_bf16(cs, 64, T, 1, seed++);
}

TEST_CASE("emulated attention kernels: bf16 tensor-core tiles mixed head plans head_dim 128") {
  unsigned seed = 600;
  for (int64_t T : {1, 65})  // three chunks of a linear head; 130 adds time (3xTF32 emulated), not cases
    for (const Case& cs : kCases) run_bf16(cs, 128, T, 1, seed++);
}

TEST_CASE("emulated attention kernels: bf16 linear heads over many chunks head_dim 64") {
  run_bf16(Case{{"linear", "linear"}, 1}, 64, 1024, 1, 700);
}

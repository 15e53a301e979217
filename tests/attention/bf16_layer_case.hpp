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
  double scale = 0, err = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const size_t i = static_cast<size_t>(r * ld + c);
      if (!std::isfinite(got[i])) return INFINITY;
      scale = std::max(scale, std::fabs(ref[i]));
      err = std::max(err, std::fabs(double(got[i]) - ref[i]));
    }
  if (zero_exact && scale == 0) return err == 0 ? 0 : INFINITY;
  double whole = 0;
  for (double x : ref) whole = std::max(whole, std::fabs(x));
  scale = std::max(scale, 0.05 * whole);
  return scale > 0 ? err / scale : err;
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

// Run g of case c (after c.ref->backward()) against the reference: out, row_stats and dqkv
// within kTol as a whole and per head / KV-group column block the layout has (zero_exact: see
// block_err); then `rerun` gives the same bits.
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

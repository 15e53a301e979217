#pragma once
// Shared pieces of the bf16 attention GPU tests (test_attention_bf16, test_attention_mma,
// test_attention_static_mma): device arrays at an element offset (to test unaligned bf16
// loads), bf16 conversions, per-block errors, the head parameters on the device and one GPU
// forward + backward of a layer on bf16 activations.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "attention/layer_fixture.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_launch.hpp"

namespace hw::cudatest::attn16 {

using hw::bf16;
using hw::cudatest::DeviceArray;

inline constexpr double kTol = 1e-2;

inline double round_bf16(double x) { return hw::to_float(hw::to_bf16(static_cast<float>(x))); }
inline double round_f32(double x) { return static_cast<float>(x); }

inline void round_all(std::vector<double>& v, double (*round)(double)) {
  for (double& x : v) x = round(x);
}

// Elements of T on the device starting `offset` elements into their allocation (offset 1
// puts bf16 data 2 bytes off the allocation's alignment).
template <class T>
struct Dev {
  std::unique_ptr<DeviceArray<T>> mem;
  int64_t offset = 0, n = 0;
  T* get() const { return mem->get() + offset; }
};

template <class T>
inline Dev<T> put(const std::vector<T>& host, int64_t offset = 0) {
  Dev<T> d{std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()) + offset), offset,
           static_cast<int64_t>(host.size())};
  if (!host.empty()) hw::device::copy_to_device(d.get(), host.data(), host.size() * sizeof(T));
  return d;
}

template <class T>
inline std::vector<T> get(const Dev<T>& d) {
  std::vector<T> host(static_cast<size_t>(d.n));
  if (!host.empty()) hw::device::copy_to_host(host.data(), d.get(), host.size() * sizeof(T));
  return host;
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

// The head parameters on the device, as floats (the reference holds the same float values).
struct DeviceParams {
  std::vector<Dev<float>> keep;
  std::vector<Dev<int32_t>> keep_i;
  std::vector<float*> dL;
  hw::attn::LayerHeadParams<float> params;

  explicit DeviceParams(const fx::Packed<double>& c) {
    params.linear_eps = c.params.linear_eps;
    auto put_f = [&](const std::vector<double>& v) {
      keep.push_back(put(std::vector<float>(v.begin(), v.end())));
      return keep.back().get();
    };
    for (size_t h = 0; h < c.plan.size(); ++h) {
      hw::attn::StaticHeadParams<float> s;
      s.alpha = put_f(c.alpha[h]);
      s.rho = put_f(c.rho[h]);
      s.log_z = put_f(c.log_z[h]);
      params.statics.push_back(s);
      hw::attn::LinearHeadParams<float> l;
      l.L = put_f(c.L[h]);
      l.dL = put_f(c.dL[h]);
      dL.push_back(l.dL);
      keep_i.push_back(put(c.groups[h]));
      l.groups = keep_i.back().get();
      l.n_groups = c.params.linears[h].n_groups;
      params.linears.push_back(l);
    }
  }
};

// GPU forward and backward of one case on bf16 arrays placed `offset` elements into their
// allocations; returns out, row_stats, dqkv and the linear heads' dL (from dL_init).
struct GpuRun {
  std::vector<bf16> out, dqkv;
  std::vector<float> stats;
  std::vector<std::vector<float>> dL;
};

inline GpuRun run_gpu(const fx::Packed<double>& ref, const std::vector<bf16>& qkv, const std::vector<bf16>& out_in,
               const std::vector<float>& stats_in, const std::vector<bf16>& dout, int64_t offset) {
  const auto& lay = ref.layout;
  const auto& dims = ref.dims;
  DeviceParams gp(ref);  // ref.dL still holds the initial values here (see run_case)
  const int64_t N = dims.B * dims.T;
  auto d_qkv = put(qkv, offset);
  auto d_out = put(bf16_nans(N * lay.out_width()), offset);
  auto d_stats = put(float_nans(dims.B * lay.n_head * dims.T));
  auto d_ws = put(float_nans(hw::cuda::attention_workspace_floats(ref.plan, lay, dims)));
  hw::cuda::launch_attention_forward(nullptr, ref.plan, lay, dims, gp.params, d_qkv.get(), d_out.get(), d_stats.get(),
                                     d_ws.get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  GpuRun r;
  r.out = get(d_out);
  r.stats = get(d_stats);

  auto d_out_in = put(out_in, offset);
  auto d_stats_in = put(stats_in);
  auto d_dout = put(dout, offset);
  auto d_dqkv = put(bf16_nans(N * lay.qkv_width()), offset);
  hw::cuda::launch_attention_backward(nullptr, ref.plan, lay, dims, gp.params, d_qkv.get(), d_out_in.get(),
                                      d_stats_in.get(), d_dout.get(), d_dqkv.get(), d_ws.get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  r.dqkv = get(d_dqkv);
  for (size_t h = 0; h < ref.plan.size(); ++h) {
    std::vector<float> dL(ref.dL[h].size());
    hw::device::copy_to_host(dL.data(), gp.dL[h], dL.size() * sizeof(float));
    r.dL.push_back(std::move(dL));
  }
  return r;
}

// One layer prepared for a bf16 GPU run against the double reference: the values both sides
// see (bf16 activations and output gradients, float head parameters, dL starting non-zero), the
// reference forward's outputs, and the backward's inputs as a bf16 forward hands them on (out
// rounded to bf16, statistics to float). run_gpu copies ref->dL, so call ref->backward() after it.
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

// The GPU run g of case c (after c.ref->backward()) against the reference: out, row_stats and
// dqkv within kTol as a whole and per head / KV-group column block the layout has (zero_exact:
// see block_err); then a second run gives the same bits.
inline void check_case(Bf16Case& c, const GpuRun& g, const std::vector<std::string>& names, bool zero_exact) {
  fx::Packed<double>& ref = *c.ref;
  const auto& lay = ref.layout;
  const int64_t B = ref.dims.B, T = ref.dims.T, N = B * T, W = lay.qkv_width(), O = lay.out_width();
  const int H = c.H, D = lay.head_dim;
  std::string where = "plan";
  for (const auto& s : names) where += " " + s;
  INFO(where << " kv " << c.KV << " D " << D << " T " << T << " B " << B);
  const std::vector<float> out = widen(g.out), dqkv = widen(g.dqkv);
  CHECK(hw::cudatest::max_rel_err(out, c.out_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(g.stats, c.stats_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(dqkv, ref.dqkv) <= kTol);
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
  const GpuRun again = run_gpu(ref, c.qkv, c.out_in, c.stats_in, c.dout, /*offset=*/0);
  CHECK(same_bits(g.out, again.out));
  CHECK(same_bits(g.dqkv, again.dqkv));
  CHECK(std::memcmp(g.stats.data(), again.stats.data(), g.stats.size() * sizeof(float)) == 0);
}

}  // namespace hw::cudatest::attn16

// The CUDA attention of a whole layer (src/kernels/cuda/attention_launch.hpp) against the CPU
// reference (attn::layer_forward / layer_backward in float) on mixed plans: softmax, window,
// sink_window, static, linear and pruned heads, with GQA, T not a multiple of the tile, head_dim
// 64 and 128. Errors are measured per column block (each head's output, statistics and
// gradient block against its own scale), so a small head cannot hide behind a large one.
// Outputs and gradients are pre-filled with NaN: every element the layout has must be written.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "kernels/cuda/attention_launch.hpp"

namespace {

using hw::cudatest::DeviceArray;

constexpr double kTol = 1e-4;

template <class T>
std::unique_ptr<DeviceArray<T>> to_device(const std::vector<T>& host) {
  auto d = std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()));
  if (!host.empty()) hw::device::copy_to_device(d->get(), host.data(), d->bytes());
  return d;
}

template <class T>
std::vector<T> to_host(const DeviceArray<T>& d) {
  std::vector<T> host(static_cast<size_t>(d.size()));
  if (!host.empty()) hw::device::copy_to_host(host.data(), d.get(), d.bytes());
  return host;
}

std::unique_ptr<DeviceArray<float>> nan_filled(int64_t n) {
  return to_device(std::vector<float>(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN()));
}

// max |got - ref| / max |ref| over rows x [col, col + width) of row-major [rows, ld] arrays;
// the scale is at least 5% of the whole array's, since a block whose exact value is 0 (the dQ
// of a window:1 head, where P = 1) holds only rounding noise on both sides.
double block_err(const std::vector<float>& got, const std::vector<float>& ref, int64_t rows, int64_t ld, int64_t col,
                 int64_t width) {
  using hw::test::bigger_scale;
  double scale = 0, err = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const size_t i = static_cast<size_t>(r * ld + c);
      scale = bigger_scale(scale, double(ref[i]));
      err = hw::test::worse(err, hw::test::abs_err(double(got[i]), double(ref[i])));
    }
  double whole = 0;
  for (float x : ref) whole = bigger_scale(whole, double(x));
  scale = bigger_scale(scale, 0.05 * whole);
  return hw::test::ratio(err, scale);
}

// The layer's head parameters on the device (static: alpha, rho, log_z; linear: L, dL, groups).
struct DeviceParams {
  std::vector<std::unique_ptr<DeviceArray<float>>> keep;
  std::vector<std::unique_ptr<DeviceArray<int32_t>>> keep_i;
  std::vector<float*> dL;
  hw::attn::LayerHeadParams<float> params;

  explicit DeviceParams(fx::Packed<float>& c) {
    params.linear_eps = c.params.linear_eps;
    for (size_t h = 0; h < c.plan.size(); ++h) {
      auto put = [&](const std::vector<float>& v) {
        keep.push_back(to_device(v));
        return keep.back()->get();
      };
      hw::attn::StaticHeadParams<float> s;
      s.alpha = put(c.alpha[h]);
      s.rho = put(c.rho[h]);
      s.log_z = put(c.log_z[h]);
      params.statics.push_back(s);
      hw::attn::LinearHeadParams<float> l;
      l.L = put(c.L[h]);
      l.dL = put(c.dL[h]);
      dL.push_back(l.dL);
      keep_i.push_back(to_device(c.groups[h]));
      l.groups = keep_i.back()->get();
      l.n_groups = c.params.linears[h].n_groups;
      params.linears.push_back(l);
    }
  }
};

struct Case {
  std::vector<std::string> plan;
  int kv = 1;
};

void run_case(const Case& cs, int D, int64_t T, int64_t B, unsigned seed) {
  std::vector<hw::attn::HeadSpec> plan;
  for (const auto& s : cs.plan) plan.push_back(fx::spec(s.c_str()));
  const ref::Layer layer = fx::make_layer(plan, cs.kv, D, B, T, seed);
  fx::Packed<float> cpu(layer);
  // Static alpha/rho gradients are not computed on the GPU (training never asks for them).
  for (auto& s : cpu.params.statics) s.dalpha = s.drho = nullptr;
  // dL accumulates: start from non-zero values on both sides.
  for (auto& v : cpu.dL)
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(i % 7) - 0.02f;
  const auto dout_r = fx::random_r(layer, seed + 1);
  const hw::attn::LayerLayout& lay = cpu.layout;
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < layer.H; ++h)
      if (lay.o_slot[size_t(h)] >= 0)
        for (int64_t t = 0; t < T; ++t)
          for (int d = 0; d < D; ++d) cpu.dout_at(b, h, t, d) = float(dout_r[size_t(b)][size_t(h)][size_t(t * D + d)]);

  const std::vector<std::vector<float>> dL_init = cpu.dL;
  DeviceParams gp(cpu);  // copies dL before the CPU backward changes it
  const int64_t N = B * T, W = lay.qkv_width(), O = lay.out_width(), H = layer.H;
  auto qkv = to_device(cpu.qkv);
  auto dout = to_device(cpu.dout);
  auto out = nan_filled(N * O);
  auto stats = nan_filled(B * H * T);
  auto dqkv = nan_filled(N * W);
  auto ws = nan_filled(hw::cuda::attention_workspace_floats(cpu.plan, lay, cpu.dims));

  cpu.forward();
  cpu.backward();
  hw::cuda::launch_attention_forward(nullptr, cpu.plan, lay, cpu.dims, gp.params, qkv->get(), out->get(),
                                     stats->get(), ws->get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> out1 = to_host(*out), stats1 = to_host(*stats);
  hw::cuda::launch_attention_backward(nullptr, cpu.plan, lay, cpu.dims, gp.params, qkv->get(), out->get(),
                                      stats->get(), dout->get(), dqkv->get(), ws->get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> dqkv1 = to_host(*dqkv);

  std::string where = "plan";
  for (const auto& s : cs.plan) where += " " + s;
  where += " kv " + std::to_string(cs.kv) + " D " + std::to_string(D) + " T " + std::to_string(T);
  INFO(where);
  for (int h = 0; h < layer.H; ++h) {
    INFO("head " << h << " (" << cs.plan[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0) CHECK(block_err(out1, cpu.out, N, O, lay.out_col(h), D) <= kTol);
    CHECK(block_err(stats1, cpu.stats, B, H * T, h * T, T) <= kTol);
    if (lay.q_slot[size_t(h)] >= 0) CHECK(block_err(dqkv1, cpu.dqkv, N, W, lay.q_col(h), D) <= kTol);
    if (plan[size_t(h)].kind == hw::attn::HeadKind::Linear) {
      std::vector<float> dL(cpu.dL[size_t(h)].size());
      hw::device::copy_to_host(dL.data(), gp.dL[size_t(h)], dL.size() * sizeof(float));
      if (T > 1) {
        CHECK(block_err(dL, cpu.dL[size_t(h)], 1, int64_t(dL.size()), 0, int64_t(dL.size())) <= kTol);
      } else {
        // One position: out = v_0 whatever L is, so the exact dL increment is 0 and both sides
        // hold only rounding noise (amplified by 1 / denominator): it must stay small.
        double worst = 0;
        for (size_t i = 0; i < dL.size(); ++i)
          worst = hw::test::worse(worst, hw::test::abs_err(double(dL[i]), dL_init[size_t(h)][i]));
        CHECK(worst <= 1e-3);
      }
    }
  }
  for (int g = 0; g < layer.KV; ++g) {
    INFO("kv group " << g);
    if (lay.k_slot[size_t(g)] >= 0) CHECK(block_err(dqkv1, cpu.dqkv, N, W, lay.k_col(g), D) <= kTol);
    if (lay.v_slot[size_t(g)] >= 0) CHECK(block_err(dqkv1, cpu.dqkv, N, W, lay.v_col(g), D) <= kTol);
  }

  // Same inputs, same bits: run both directions again (dL accumulates, so compare dQKV only).
  hw::cuda::launch_attention_forward(nullptr, cpu.plan, lay, cpu.dims, gp.params, qkv->get(), out->get(),
                                     stats->get(), ws->get());
  hw::cuda::launch_attention_backward(nullptr, cpu.plan, lay, cpu.dims, gp.params, qkv->get(), out->get(),
                                      stats->get(), dout->get(), dqkv->get(), ws->get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> out2 = to_host(*out), dqkv2 = to_host(*dqkv);
  CHECK(std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(dqkv1.data(), dqkv2.data(), dqkv1.size() * sizeof(float)) == 0);
}

const std::vector<Case> kCases = {
    // groups of two: (softmax, window), (sink_window, static), (linear, pruned), (softmax, window:1)
    {{"softmax", "window:40", "sink_window:3:50", "static", "linear", "pruned", "softmax", "window:1"}, 4},
    // groups of four mixing every kind that shares K/V: static + linear + softmax in one group
    {{"static", "linear", "softmax", "pruned", "window:100", "linear", "static", "sink_window:64:64"}, 2},
    // multi-query: every head on one K/V
    {{"softmax", "softmax", "window:70", "sink_window:1:1"}, 1},
    // a group of static heads only (no K block), a group of linear heads only
    {{"static", "static", "linear", "linear", "pruned", "pruned"}, 3},
};

}  // namespace

TEST_CASE("attention parity: mixed head plans, forward and backward, head_dim 64 and 128") {
  unsigned seed = 100;
  for (int D : {64, 128})
    for (int64_t T : {1, 65, 200, 333})
      for (const Case& cs : kCases) run_case(cs, D, T, 2, seed++);
}

TEST_CASE("attention parity: unsupported shapes and requests are refused with hw::Error") {
  std::vector<hw::attn::HeadSpec> plan = {fx::spec("softmax"), fx::spec("static")};
  const ref::Layer layer = fx::make_layer(plan, 2, 32, 1, 8, 1);
  fx::Packed<float> cpu(layer);
  REQUIRE_THROWS_AS(hw::cuda::attention_workspace_floats(cpu.plan, cpu.layout, cpu.dims), hw::Error);
  const ref::Layer l64 = fx::make_layer(plan, 2, 64, 1, 8, 1);
  fx::Packed<float> c64(l64);
  DeviceParams gp(c64);
  gp.params.statics[1].dalpha = gp.keep.front()->get();  // asks for static gradients
  const float* none = nullptr;  // typed: the launcher has fp32 and bf16 overloads
  REQUIRE_THROWS_AS(hw::cuda::launch_attention_backward(nullptr, c64.plan, c64.layout, c64.dims, gp.params, none, none,
                                                        none, none, nullptr, nullptr),
                    hw::Error);
}

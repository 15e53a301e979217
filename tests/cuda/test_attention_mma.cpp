// Edge cases of the tensor-core (bf16) softmax-family attention tiles (attention_mma_*.cuh), beyond
// the mixed-plan parity of test_attention_bf16.cpp: sequences of 1 and 2 tokens (one row block,
// almost every lane masked), exactly one tile, one row past a tile, and a long sequence (4096) where
// a window's key tiles and a sink's tiles lie far apart. Softmax-family heads only (GQA groups of
// two), head_dim 64 and 128, against the CPU reference in double on bf16-rounded inputs (the
// backward gets the reference forward's out rounded to bf16 and its statistics rounded to float);
// max |got - ref| / max |ref| <= 1e-2 per tensor and per head block; reruns give the same bits.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_launch.hpp"

namespace {

using hw::bf16;
using hw::cudatest::DeviceArray;

constexpr double kTol = 1e-2;

double round_bf16(double x) { return hw::to_float(hw::to_bf16(static_cast<float>(x))); }

template <class T>
std::unique_ptr<DeviceArray<T>> put(const std::vector<T>& host) {
  auto d = std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()));
  if (!host.empty()) hw::device::copy_to_device(d->get(), host.data(), host.size() * sizeof(T));
  return d;
}
template <class T>
std::vector<T> get(const DeviceArray<T>& d) {
  std::vector<T> host(static_cast<size_t>(d.size()));
  if (!host.empty()) hw::device::copy_to_host(host.data(), d.get(), host.size() * sizeof(T));
  return host;
}
std::vector<bf16> as_bf16(const std::vector<double>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = hw::to_bf16(static_cast<float>(v[i]));
  return out;
}
std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = hw::to_float(v[i]);
  return out;
}

// max |got - ref| / max |ref| over rows x [col, col + width) of row-major [rows, ld] arrays, the
// scale at least 5% of the whole array's (a head's dQ can be nearly zero, e.g. window:1).
double block_err(const std::vector<float>& got, const std::vector<double>& ref, int64_t rows, int64_t ld, int64_t col,
                 int64_t width) {
  double scale = 0, err = 0, whole = 0;
  for (double x : ref) whole = std::max(whole, std::fabs(x));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const size_t i = static_cast<size_t>(r * ld + c);
      if (!std::isfinite(got[i])) return INFINITY;
      scale = std::max(scale, std::fabs(ref[i]));
      err = std::max(err, std::fabs(double(got[i]) - ref[i]));
    }
  scale = std::max(scale, 0.05 * whole);
  return scale > 0 ? err / scale : err;
}

struct GpuRun {
  std::vector<bf16> out, dqkv;
  std::vector<float> stats;
};

GpuRun run_gpu(const fx::Packed<double>& ref, const hw::attn::LayerHeadParams<float>& params,
               const std::vector<bf16>& qkv, const std::vector<bf16>& out_in, const std::vector<float>& stats_in,
               const std::vector<bf16>& dout) {
  const auto& lay = ref.layout;
  const int64_t N = ref.dims.B * ref.dims.T;
  auto d_qkv = put(qkv);
  auto d_out = put(std::vector<bf16>(size_t(N * lay.out_width()), hw::to_bf16(NAN)));
  auto d_stats = put(std::vector<float>(size_t(ref.dims.B * lay.n_head * ref.dims.T), NAN));
  auto d_ws = put(std::vector<float>(size_t(hw::cuda::attention_workspace_floats(ref.plan, lay, ref.dims)), NAN));
  hw::cuda::launch_attention_forward(nullptr, ref.plan, lay, ref.dims, params, d_qkv->get(), d_out->get(),
                                     d_stats->get(), d_ws->get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  GpuRun r;
  r.out = get(*d_out);
  r.stats = get(*d_stats);
  auto d_out_in = put(out_in);
  auto d_stats_in = put(stats_in);
  auto d_dout = put(dout);
  auto d_dqkv = put(std::vector<bf16>(size_t(N * lay.qkv_width()), hw::to_bf16(NAN)));
  hw::cuda::launch_attention_backward(nullptr, ref.plan, lay, ref.dims, params, d_qkv->get(), d_out_in->get(),
                                      d_stats_in->get(), d_dout->get(), d_dqkv->get(), d_ws->get());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  r.dqkv = get(*d_dqkv);
  return r;
}

void run_case(const std::vector<std::string>& names, int kv, int D, int64_t T, int64_t B, unsigned seed) {
  std::vector<hw::attn::HeadSpec> plan;
  for (const auto& s : names) plan.push_back(fx::spec(s.c_str()));
  const ref::Layer layer = fx::make_layer(plan, kv, D, B, T, seed);
  fx::Packed<double> ref(layer);
  const auto& lay = ref.layout;
  const int H = layer.H;
  const int64_t N = B * T, W = lay.qkv_width(), O = lay.out_width();
  for (double& x : ref.qkv) x = round_bf16(x);
  const auto R = fx::random_r(layer, seed + 1);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) ref.dout_at(b, h, t, d) = round_bf16(R[size_t(b)][size_t(h)][size_t(t * D + d)]);
  ref.forward();
  const std::vector<double> out_ref = ref.out, stats_ref = ref.stats;
  for (double& x : ref.out) x = round_bf16(x);
  std::vector<float> stats_in(ref.stats.begin(), ref.stats.end());
  for (size_t i = 0; i < stats_in.size(); ++i) ref.stats[i] = stats_in[i];
  const std::vector<bf16> qkv = as_bf16(ref.qkv), out_in = as_bf16(ref.out), dout = as_bf16(ref.dout);
  ref.backward();

  const hw::attn::LayerHeadParams<float> params;  // softmax-family heads take no parameters
  const GpuRun g = run_gpu(ref, params, qkv, out_in, stats_in, dout);
  std::string where = "plan";
  for (const auto& s : names) where += " " + s;
  INFO(where << " kv " << kv << " D " << D << " T " << T << " B " << B);
  const std::vector<float> out = widen(g.out), dqkv = widen(g.dqkv);
  CHECK(hw::cudatest::max_rel_err(out, out_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(g.stats, stats_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(dqkv, ref.dqkv) <= kTol);
  for (int h = 0; h < H; ++h) {
    INFO("head " << h << " (" << names[size_t(h)] << ")");
    CHECK(block_err(out, out_ref, N, O, lay.out_col(h), D) <= kTol);
    CHECK(block_err(g.stats, stats_ref, B, H * T, h * T, T) <= kTol);
    CHECK(block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D) <= kTol);
  }
  for (int grp = 0; grp < layer.KV; ++grp) {
    INFO("kv group " << grp);
    CHECK(block_err(dqkv, ref.dqkv, N, W, lay.k_col(grp), D) <= kTol);
    CHECK(block_err(dqkv, ref.dqkv, N, W, lay.v_col(grp), D) <= kTol);
  }
  const GpuRun again = run_gpu(ref, params, qkv, out_in, stats_in, dout);
  CHECK(std::memcmp(g.out.data(), again.out.data(), g.out.size() * sizeof(bf16)) == 0);
  CHECK(std::memcmp(g.dqkv.data(), again.dqkv.data(), g.dqkv.size() * sizeof(bf16)) == 0);
  CHECK(std::memcmp(g.stats.data(), again.stats.data(), g.stats.size() * sizeof(float)) == 0);
}

const std::vector<std::string> kPlan = {"softmax", "window:1", "sink_window:2:3", "window:17"};

}  // namespace

TEST_CASE("attention mma tiles: T = 1, 2, one tile, one row past a tile (head_dim 64 and 128)") {
  unsigned seed = 900;
  for (int D : {64, 128})
    for (int64_t T : {1, 2, 64, 65}) run_case(kPlan, 2, D, T, 2, seed++);
}

TEST_CASE("attention mma tiles: T = 4096, window and sink tiles far apart") {
  run_case({"softmax", "sink_window:4:300", "window:200", "softmax"}, 2, 64, 4096, 1, 950);
}

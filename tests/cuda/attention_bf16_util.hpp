#pragma once
// Device side of the bf16 attention GPU tests (test_attention_bf16, test_attention_mma,
// test_attention_static_mma): device arrays at an element offset (to test unaligned bf16
// loads), the head parameters on the device and one GPU forward + backward of a layer on bf16
// activations. Case preparation and checks: tests/attention/bf16_layer_case.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "attention/bf16_layer_case.hpp"
#include "attention/layer_fixture.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_launch.hpp"

namespace hw::cudatest::attn16 {

using namespace hw::attn_case;  // the case preparation and checks the emulated tests share

using hw::bf16;
using hw::cudatest::DeviceArray;

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
using GpuRun = LayerRun;

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

}  // namespace hw::cudatest::attn16

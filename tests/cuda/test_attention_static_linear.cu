// GPU parity of the static and linear head device functions (src/kernels/cuda/attention_static.cuh,
// attention_linear.cuh), called directly from small test kernels, one block per item (so they
// are checked apart from the mixed-head launcher and its schedule; a linear head's stages run
// one launch per stage, so each finds its predecessor done): out, linear row
// denominators, linear dQ / dK / dV partials and dL, static dV, against the CPU entry point
// (attn::layer_forward / layer_backward) in float, for T not a multiple of the tile or chunk.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_linear.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_static.cuh"
#include "support/rel_err.hpp"

namespace {

using namespace hw::cuda;

// An item of the test kernels: kind 0 static (tile = query tile, or key tile backward), 1 linear
// (forward, or the dQ chain backward), 2 the linear dK/dV chain; tile = stage for linear kinds.
struct TestItem {
  int kind, b, h, tile;
};

template <int HD>
__global__ void __launch_bounds__(256) forward_items(const __grid_constant__ AttnLaunchParams p, const TestItem* items) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const TestItem it = items[blockIdx.x];
  if (it.kind == 0) attn_dev::static_item_forward<HD>(p, it.b, it.h, it.tile, smem);
  else attn_dev::linear_item_forward<HD>(p, it.b, it.h, it.tile, smem);
}

// Static items add into a zeroed [64][HD] dV block in shared memory, then store its rows to
// dv_static[(b * n_head + h) * T + j] (HD wide).
template <int HD>
__global__ void __launch_bounds__(256) backward_items(const __grid_constant__ AttnLaunchParams p, const TestItem* items,
                                                     float* dv_static) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const TestItem it = items[blockIdx.x];
  if (it.kind == 1) {
    attn_dev::linear_item_backward_dq<HD>(p, it.b, it.h, it.tile, smem);
    return;
  }
  if (it.kind == 2) {
    attn_dev::linear_item_backward_dkv<HD>(p, it.b, it.h, it.tile, smem);
    return;
  }
  float* dv_acc = smem;
  for (int e = static_cast<int>(threadIdx.x); e < 64 * HD; e += 256) dv_acc[e] = 0.f;
  attn_dev::static_kv_tile_backward<HD>(p, it.b, it.h, it.tile, dv_acc, smem + 64 * HD);
  const int64_t j0 = int64_t(it.tile) * 64;
  for (int e = static_cast<int>(threadIdx.x); e < 64 * HD; e += 256) {
    const int64_t j = j0 + e / HD;
    if (j < p.T) dv_static[((int64_t(it.b) * p.n_head + it.h) * p.T + j) * HD + e % HD] = dv_acc[e];
  }
}

void cuda_ok(cudaError_t e, const char* what) { INFO(what << ": " << cudaGetErrorString(e)); REQUIRE(e == cudaSuccess); }

// Device copy of a host vector, freed on scope exit.
template <class T>
struct Dev {
  T* ptr = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& host) : n(std::max<size_t>(host.size(), 1)) {
    ptr = static_cast<T*>(hw::device::alloc(n * sizeof(T), "attention static/linear test"));
    if (!host.empty()) hw::device::copy_to_device(ptr, host.data(), host.size() * sizeof(T));
  }
  ~Dev() { hw::device::free(ptr); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get(size_t count) const {
    std::vector<T> h(count);
    hw::device::copy_to_host(h.data(), ptr, count * sizeof(T));
    return h;
  }
};

// max |a - b| / max(max |b|, 1) (inputs are O(1); the floor makes it absolute for tensors that
// are zero in exact arithmetic, such as dL at T = 1).
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return hw::test::max_rel_err_floor(a, b, 1.0);  // a NaN or an infinity on either side: infinite
}

template <int HD>
void check_plan(int64_t B, int64_t T, unsigned seed) {
  INFO("head_dim " << HD << " B " << B << " T " << T);
  const std::vector<fx::HeadSpec> plan = {fx::spec("linear"), fx::spec("static"), fx::spec("linear"),
                                          fx::spec("static")};
  const int H = 4, n_lin = 2;
  const ref::Layer l = fx::make_layer(plan, H, HD, B, T, seed);
  const auto R = fx::random_r(l, seed + 1);
  fx::Packed<float> pk(l);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < HD; ++d) pk.dout_at(b, h, t, d) = float(R[size_t(b)][size_t(h)][size_t(t * HD + d)]);
  for (auto& s : pk.params.statics) s.dalpha = s.drho = nullptr;  // the GPU computes dV only
  pk.forward();
  pk.backward();

  // device inputs and outputs
  Dev<float> qkv(pk.qkv), out(std::vector<float>(pk.out.size(), NAN)), out_in(pk.out), dout(pk.dout);
  Dev<float> stats(std::vector<float>(pk.stats.size(), NAN)), stats_in(pk.stats);
  Dev<float> dqkv(std::vector<float>(pk.qkv.size(), NAN));
  const int64_t slot = linear_dA_floats(HD) + 2 * T * HD + attn_dev::linear_scratch_floats(HD, T);
  const int64_t sync = linear_sync_floats(B, n_lin, HD);  // zeroed: tickets are unused here
  std::vector<float> ws_init(size_t(sync + B * n_lin * slot), NAN);
  std::fill(ws_init.begin(), ws_init.begin() + sync, 0.f);
  Dev<float> ws(ws_init);
  Dev<float> dv_static(std::vector<float>(size_t(B * H * T * HD), NAN));
  std::vector<std::unique_ptr<Dev<float>>> keep;
  std::vector<std::unique_ptr<Dev<int32_t>>> keep_i;
  AttnLaunchParams p;
  p.qkv = qkv.ptr;
  p.out = out.ptr;
  p.out_in = out_in.ptr;
  p.row_stats = stats.ptr;
  p.row_stats_in = stats_in.ptr;
  p.dout = dout.ptr;
  p.dqkv = dqkv.ptr;
  p.workspace = ws.ptr;
  p.qkv_stride = pk.layout.qkv_width();
  p.out_stride = pk.layout.out_width();
  p.B = int32_t(B);
  p.T = int32_t(T);
  p.n_head = H;
  p.n_kv_head = H;
  p.head_dim = HD;
  p.scale = 1.f / std::sqrt(float(HD));
  p.linear_eps = float(l.eps);
  p.n_linear = n_lin;
  p.linear_sync_floats = sync;
  p.linear_slot_floats = slot;
  // Static items in one launch; linear items by stage (launch s holds stage s of every head).
  constexpr int n_stages = hw::tiles::linear_stage_count(HD);
  std::vector<TestItem> fwd, bwd;
  std::vector<std::vector<TestItem>> fwd_lin(n_stages), bwd_lin(n_stages);
  for (int h = 0, ls = 0; h < H; ++h) {
    AttnHeadDesc& d = p.heads[h];
    const bool lin = plan[size_t(h)].kind == fx::HeadKind::Linear;
    d.kind = lin ? kLinear : kStatic;
    d.kv_head = h;
    d.q_col = lin ? pk.layout.q_col(h) : -1;
    d.k_col = lin ? pk.layout.k_col(h) : -1;
    d.v_col = pk.layout.v_col(h);
    d.out_col = pk.layout.out_col(h);
    if (lin) {
      keep.push_back(std::make_unique<Dev<float>>(pk.L[size_t(h)]));
      d.L = keep.back()->ptr;
      keep_i.push_back(std::make_unique<Dev<int32_t>>(pk.groups[size_t(h)]));
      d.groups = keep_i.back()->ptr;
      d.n_groups = l.G[size_t(h)];
      d.linear_slot = ls++;
    } else {
      keep.push_back(std::make_unique<Dev<float>>(pk.alpha[size_t(h)]));
      d.alpha = keep.back()->ptr;
      keep.push_back(std::make_unique<Dev<float>>(pk.rho[size_t(h)]));
      d.rho = keep.back()->ptr;
      keep.push_back(std::make_unique<Dev<float>>(pk.log_z[size_t(h)]));
      d.log_z = keep.back()->ptr;
    }
    for (int b = 0; b < int(B); ++b) {
      if (lin) {
        for (int st = 0; st < n_stages; ++st) {
          fwd_lin[size_t(st)].push_back({1, b, h, st});
          bwd_lin[size_t(st)].push_back({1, b, h, st});
          bwd_lin[size_t(st)].push_back({2, b, h, st});
        }
      } else {
        for (int t = 0; t < int(hw::tiles::ceil_div(T, 64)); ++t) {
          fwd.push_back({0, b, h, t});
          bwd.push_back({0, b, h, t});
        }
      }
    }
  }
  const int fwd_smem =
      std::max(attn_dev::static_forward_smem_bytes<HD>(), attn_dev::linear_forward_smem_bytes<HD, float>());
  const int bwd_smem = std::max(int(sizeof(float)) * 64 * HD + attn_dev::static_backward_smem_bytes<HD>(),
                                attn_dev::linear_backward_smem_bytes<HD, float>());
  cuda_ok(cudaFuncSetAttribute(forward_items<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, fwd_smem), "smem fwd");
  cuda_ok(cudaFuncSetAttribute(backward_items<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, bwd_smem), "smem bwd");
  auto run = [&](const std::vector<TestItem>& items, bool backward) {
    const Dev<TestItem> d_items(items);
    if (backward) backward_items<HD><<<unsigned(items.size()), 256, size_t(bwd_smem)>>>(p, d_items.ptr, dv_static.ptr);
    else forward_items<HD><<<unsigned(items.size()), 256, size_t(fwd_smem)>>>(p, d_items.ptr);
    cuda_ok(cudaGetLastError(), backward ? "backward launch" : "forward launch");
    cuda_ok(cudaDeviceSynchronize(), "kernels");
  };
  run(fwd, false);
  for (const auto& items : fwd_lin) run(items, false);
  cuda_ok(cudaMemset(ws.ptr, 0, sizeof(float) * size_t(sync)), "chain counters");  // the dQ chain reuses them
  run(bwd, true);
  for (const auto& items : bwd_lin) run(items, true);

  const auto g_out = out.get(pk.out.size()), g_stats = stats.get(pk.stats.size());
  const auto g_dqkv = dqkv.get(pk.qkv.size()), g_ws = ws.get(size_t(sync + B * n_lin * slot));
  const auto g_dv_static = dv_static.get(size_t(B * H * T * HD));
  const double tol = 2e-5;  // float on both sides: each within ~1e-5 of the double reference
  for (int h = 0; h < H; ++h) {
    const bool lin = plan[size_t(h)].kind == fx::HeadKind::Linear;
    std::vector<float> A_sum(size_t((l.G[size_t(h)] + 1) * (l.G[size_t(h)] + 1)), 0.f);
    for (int64_t b = 0; b < B; ++b) {
      INFO("head " << h << (lin ? " (linear)" : " (static)") << " sequence " << b);
      std::vector<float> o, co, s, cs, dq, cdq, dk, cdk, dv, cdv;
      const float* sl = lin ? g_ws.data() + sync + (b * n_lin + p.heads[h].linear_slot) * slot : nullptr;
      for (int64_t t = 0; t < T; ++t) {
        s.push_back(g_stats[size_t((b * H + h) * T + t)]);
        cs.push_back(pk.stats[size_t((b * H + h) * T + t)]);
        for (int d = 0; d < HD; ++d) {
          o.push_back(g_out[size_t((b * T + t) * p.out_stride + p.heads[h].out_col + d)]);
          co.push_back(pk.out_at(b, h, t, d));
          cdv.push_back(pk.dqkv_at(b, t, pk.layout.v_col(h) + d));
          if (lin) {
            dq.push_back(g_dqkv[size_t((b * T + t) * p.qkv_stride + p.heads[h].q_col + d)]);
            cdq.push_back(pk.dqkv_at(b, t, pk.layout.q_col(h) + d));
            dk.push_back(sl[linear_dA_floats(HD) + t * HD + d]);
            cdk.push_back(pk.dqkv_at(b, t, pk.layout.k_col(h) + d));
            dv.push_back(sl[linear_dA_floats(HD) + T * HD + t * HD + d]);
          } else {
            dv.push_back(g_dv_static[size_t(((b * H + h) * T + t) * HD + d)]);
          }
        }
      }
      CHECK(rel_err(o, co) <= tol);
      CHECK(rel_err(dv, cdv) <= tol);
      if (lin) {
        CHECK(rel_err(s, cs) <= tol);
        CHECK(rel_err(dq, cdq) <= tol);
        CHECK(rel_err(dk, cdk) <= tol);
        for (size_t e = 0; e < A_sum.size(); ++e) A_sum[e] += sl[e];
      }
    }
    if (!lin) continue;
    const int G1 = l.G[size_t(h)] + 1;
    std::vector<float> dL, cdL;
    for (int r = 0; r < G1; ++r)
      for (int c = 0; c <= r; ++c) {
        dL.push_back(hw::tiles::linear_dL_entry(A_sum.data(), pk.L[size_t(h)].data(), G1, r, c));
        cdL.push_back(pk.dL[size_t(h)][size_t(r * G1 + c)]);
      }
    INFO("dL of head " << h);
    CHECK(rel_err(dL, cdL) <= tol);
  }
}

}  // namespace

TEST_CASE("static and linear head device functions match the CPU attention") {
  check_plan<64>(2, 100, 5u);
  check_plan<64>(1, 1, 6u);
  check_plan<64>(1, 257, 8u);
  check_plan<128>(1, 45, 7u);
}

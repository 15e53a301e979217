// The CUDA attention launchers and kernels (attention_launch.cu, attention_forward.cu,
// attention_backward.cu and the device code they include) run on the CPU block emulator,
// against the CPU reference: every head kind mixed in one layer, fp32 activations (the exact SIMT tiles) and
// bf16 activations (the tensor-core tiles, mma emulated per warp in double), T not a multiple
// of any tile. This is the GPU parity suite (tests/cuda) without a GPU: it checks indexing,
// masks, barriers, shared-memory carving and the item schedule; it cannot check timing,
// memory-model or compiler effects, which only tests/cuda on a GPU can.
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

// fp32: the emulated kernels against the double reference, within the GPU parity bound (1e-4).
void run_fp32(const Case& cs, int D, int64_t T, int64_t B, unsigned seed) {
  constexpr double kTol = 1e-4;
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

  ref.forward();
  ref.backward();
  hw::cuda::launch_attention_forward(nullptr, ref.plan, lay, ref.dims, params, qkv.data(), out.data(), stats.data(),
                                     ws.data());
  hw::cuda::launch_attention_backward(nullptr, ref.plan, lay, ref.dims, params, qkv.data(), out.data(), stats.data(),
                                      dout.data(), dqkv.data(), ws.data());
  INFO(describe(cs, D, T));
  for (int h = 0; h < layer.H; ++h) {
    INFO("head " << h << " (" << cs.plan[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0) CHECK(block_err(out, ref.out, N, O, lay.out_col(h), D) <= kTol);
    CHECK(block_err(stats, ref.stats, B, H * T, h * T, T) <= kTol);
    if (lay.q_slot[size_t(h)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D) <= kTol);
    if (plan[size_t(h)].kind == hw::attn::HeadKind::Linear && T > 1)  // T = 1: dL's increment is 0 (noise)
      CHECK(block_err(dL[size_t(h)], ref.dL[size_t(h)], 1, int64_t(dL[size_t(h)].size()), 0,
                      int64_t(dL[size_t(h)].size())) <= kTol);
  }
  for (int g = 0; g < layer.KV; ++g) {
    INFO("kv group " << g);
    if (lay.k_slot[size_t(g)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.k_col(g), D) <= kTol);
    if (lay.v_slot[size_t(g)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.v_col(g), D) <= kTol);
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

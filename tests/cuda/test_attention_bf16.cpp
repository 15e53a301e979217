// The bf16 overloads of the CUDA attention (src/kernels/cuda/attention_launch.hpp: bf16 qkv,
// out, dout, dqkv; fp32 statistics, head parameters and workspace) against the CPU reference
// attn::layer_forward / layer_backward in double, on mixed GQA plans holding every head kind,
// head_dim 64 and 128, T not a multiple of the tile. Both sides see the same values: qkv and
// dout are rounded to bf16 and head parameters to float first; the backward gets the
// reference forward's out rounded to bf16 and its statistics rounded to float (what a bf16
// forward hands on), so each direction is checked on its own. Errors are max |got - ref| /
// max |ref| per column block (each head's output, statistics and gradient block, each KV
// group's dK and dV) and per whole tensor, tolerance 1e-2 (the bf16 stores alone cost up to
// 2^-9). Outputs start as NaN, so every element the layout has must be written; a second
// run must give the same bits, and so must a run whose bf16 arrays sit 2 bytes off a
// 16-byte boundary (the kernels' scalar load path instead of their 16-byte vector loads).
// The launch parameters these plans produce are checked on the host in
// test_attention_setup_host.cpp (which CI runs without a GPU, in test_emulated).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "cuda/attention_bf16_cases.hpp"
#include "cuda/attention_bf16_util.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_setup.hpp"

namespace {

using namespace hw::cudatest::attn16;

void run_case(const Case& cs, int D, int64_t T, int64_t B, unsigned seed) {
  Bf16Case c = prepare_case(cs.plan, cs.kv, D, T, B, seed);
  fx::Packed<double>& ref = *c.ref;
  const auto& plan = c.plan;
  const auto& [out_ref, stats_ref, qkv, out_in, dout, stats_in] =
      std::tie(c.out_ref, c.stats_ref, c.qkv, c.out_in, c.dout, c.stats_in);
  const hw::attn::LayerLayout& lay = ref.layout;
  const int H = c.H;
  const int64_t N = B * T, W = lay.qkv_width(), O = lay.out_width();

  // The GPU parameters copy dL before the reference backward changes it.
  const GpuRun g = run_gpu(ref, qkv, out_in, stats_in, dout, 0);
  ref.backward();

  std::string where = "plan";
  for (const auto& s : cs.plan) where += " " + s;
  where += " kv " + std::to_string(cs.kv) + " D " + std::to_string(D) + " T " + std::to_string(T);
  INFO(where);
  const std::vector<float> out = widen(g.out), dqkv = widen(g.dqkv);
  CHECK(hw::cudatest::max_rel_err(out, out_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(g.stats, stats_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(dqkv, ref.dqkv) <= kTol);  // also: every column written (no NaN)
  for (int h = 0; h < H; ++h) {
    INFO("head " << h << " (" << cs.plan[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0) CHECK(block_err(out, out_ref, N, O, lay.out_col(h), D) <= kTol);
    CHECK(block_err(g.stats, stats_ref, B, H * T, h * T, T) <= kTol);
    if (lay.q_slot[size_t(h)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D) <= kTol);
    if (plan[size_t(h)].kind == hw::attn::HeadKind::Linear) {
      const auto& dL = g.dL[size_t(h)];
      CHECK(block_err(dL, ref.dL[size_t(h)], 1, int64_t(dL.size()), 0, int64_t(dL.size())) <= kTol);
    }
  }
  for (int grp = 0; grp < c.KV; ++grp) {
    INFO("kv group " << grp);
    if (lay.k_slot[size_t(grp)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.k_col(grp), D) <= kTol);
    if (lay.v_slot[size_t(grp)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.v_col(grp), D) <= kTol);
  }

  // Same inputs, same bits: again from the same dL, and with every bf16 array 2 bytes off its
  // alignment (scalar loads instead of 16-byte vectors).
  ref.dL = c.dL_init;
  const GpuRun again = run_gpu(ref, qkv, out_in, stats_in, dout, 0);
  const GpuRun shifted = run_gpu(ref, qkv, out_in, stats_in, dout, 1);
  CHECK(same_bits(g.out, again.out));
  CHECK(same_bits(g.dqkv, again.dqkv));
  CHECK(same_bits(g.out, shifted.out));
  CHECK(same_bits(g.dqkv, shifted.dqkv));
  CHECK(std::memcmp(g.stats.data(), shifted.stats.data(), g.stats.size() * sizeof(float)) == 0);
  for (size_t h = 0; h < g.dL.size(); ++h) CHECK(g.dL[h] == shifted.dL[h]);
}

}  // namespace

TEST_CASE("attention bf16 parity: mixed head plans against the double reference, head_dim 64 and 128") {
  unsigned seed = 500;
  for (int D : {64, 128})
    for (int64_t T : {100, 257})
      for (const Case& cs : kCases) run_case(cs, D, T, 2, seed++);
}

// A linear head is a chain of stage items that wait for each other chunk by chunk
// (attention_linear.cuh); 64 chunks and 2 x 4 heads keep many stages in flight at once (17 per
// chain at head_dim 64, 132 at 128, so there later stages start as earlier ones finish), and
// the reruns must still give the same bits.
TEST_CASE("attention bf16: linear heads over 64 chunks (T = 2048), chains in flight, same bits on rerun") {
  run_case(Case{{"linear", "linear", "linear", "linear"}, 2}, 64, 2048, 2, 900);
  run_case(Case{{"linear", "linear", "linear", "linear"}, 2}, 128, 2048, 2, 901);
}

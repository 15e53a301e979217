// Edge cases of the tensor-core (bf16) static-head tiles (attention_mma_static.cuh), beyond the
// mixed-plan parity of test_attention_bf16.cpp: layers of static heads only (every item a static
// one; the dK/dV items seed nothing from softmax heads) at T = 1, 2, 64, 65 and 4096 (64 key tiles
// per late query tile, one query tile per key tile at the end), and a KV group mixing a static head
// with a softmax head at T = 4096 (the static dV seeds the tensor-core softmax dK/dV item). Head_dim
// 64 and 128, against the CPU reference in double on bf16-rounded activations and float-rounded
// parameters; max |got - ref| / max |ref| <= 1e-2 per tensor and per column block the layout has
// (a block whose reference is zero, e.g. a static head's row statistics, must be exactly zero);
// reruns give the same bits.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "cuda/attention_bf16_util.hpp"
#include "cuda/cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "kernels/cuda/attention_launch.hpp"

namespace {

using namespace hw::cudatest::attn16;

constexpr bool kExact = true;  // block_err: a block whose reference is exactly zero must be zero

void run_case(const std::vector<std::string>& names, int kv, int D, int64_t T, int64_t B, unsigned seed) {
  Bf16Case c = prepare_case(names, kv, D, T, B, seed);
  fx::Packed<double>& ref = *c.ref;
  const auto& [out_ref, stats_ref, qkv, out_in, dout, stats_in] =
      std::tie(c.out_ref, c.stats_ref, c.qkv, c.out_in, c.dout, c.stats_in);
  const auto& lay = ref.layout;
  const int H = c.H;
  const int64_t N = B * T, W = lay.qkv_width(), O = lay.out_width();
  ref.backward();

  const GpuRun g = run_gpu(ref, qkv, out_in, stats_in, dout, /*offset=*/0);
  std::string where = "plan";
  for (const auto& s : names) where += " " + s;
  INFO(where << " kv " << kv << " D " << D << " T " << T << " B " << B);
  const std::vector<float> out = widen(g.out), dqkv = widen(g.dqkv);
  CHECK(hw::cudatest::max_rel_err(out, out_ref) <= kTol);
  CHECK(hw::cudatest::max_rel_err(dqkv, ref.dqkv) <= kTol);
  for (int h = 0; h < H; ++h) {
    INFO("head " << h << " (" << names[size_t(h)] << ")");
    if (lay.o_slot[size_t(h)] >= 0) CHECK(block_err(out, out_ref, N, O, lay.out_col(h), D, kExact) <= kTol);
    CHECK(block_err(g.stats, stats_ref, B, H * T, h * T, T, kExact) <= kTol);
    if (lay.q_slot[size_t(h)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.q_col(h), D, kExact) <= kTol);
  }
  for (int grp = 0; grp < c.KV; ++grp) {
    INFO("kv group " << grp);
    if (lay.k_slot[size_t(grp)] >= 0) CHECK(block_err(dqkv, ref.dqkv, N, W, lay.k_col(grp), D, kExact) <= kTol);
    REQUIRE(lay.v_slot[size_t(grp)] >= 0);  // static heads read V
    CHECK(block_err(dqkv, ref.dqkv, N, W, lay.v_col(grp), D, kExact) <= kTol);
  }
  const GpuRun again = run_gpu(ref, qkv, out_in, stats_in, dout, /*offset=*/0);
  CHECK(std::memcmp(g.out.data(), again.out.data(), g.out.size() * sizeof(bf16)) == 0);
  CHECK(std::memcmp(g.dqkv.data(), again.dqkv.data(), g.dqkv.size() * sizeof(bf16)) == 0);
  CHECK(std::memcmp(g.stats.data(), again.stats.data(), g.stats.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("attention mma static tiles: static-only layers, T = 1, 2, 64, 65 (head_dim 64 and 128)") {
  unsigned seed = 1200;
  for (int D : {64, 128})
    for (int64_t T : {1, 2, 64, 65}) run_case({"static", "static", "static", "static"}, 2, D, T, 2, seed++);
}

TEST_CASE("attention mma static tiles: T = 4096, a static-only layer and a static head sharing K/V with softmax") {
  run_case({"static", "static"}, 1, 64, 4096, 1, 1250);
  run_case({"static", "softmax"}, 1, 128, 4096, 1, 1251);
}

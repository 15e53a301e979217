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
  for (int grp = 0; grp < c.KV; ++grp) REQUIRE(c.ref->layout.v_slot[size_t(grp)] >= 0);  // static heads read V
  c.ref->backward();
  const auto run = [&] { return run_gpu(*c.ref, c.qkv, c.out_in, c.stats_in, c.dout, /*offset=*/0); };
  check_case(c, run(), names, kExact, run);
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

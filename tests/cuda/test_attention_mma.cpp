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

void run_case(const std::vector<std::string>& names, int kv, int D, int64_t T, int64_t B, unsigned seed) {
  Bf16Case c = prepare_case(names, kv, D, T, B, seed);
  c.ref->backward();
  const auto run = [&] { return run_gpu(*c.ref, c.qkv, c.out_in, c.stats_in, c.dout, /*offset=*/0); };
  check_case(c, run(), names, /*zero_exact=*/false, run);
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

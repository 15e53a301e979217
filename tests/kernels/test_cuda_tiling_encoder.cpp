// CPU test of the CUDA encoder backward's deterministic dwte scheme (tiles/encoder_buckets.hpp):
// a host simulation of the kernel's walk (bucketed warps, token tiles, the element held in a
// register across hits of one token) must reproduce the CPU reference bit for bit, since each
// dwte element receives its float additions in position order.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/tiles/encoder_buckets.hpp"

using namespace hw::tiles;

namespace {

// The kernel's work for one (bucket, channel) lane, run for all of them.
void simulate_dwte(std::vector<float>& dwte, const std::vector<float>& dout, const std::vector<int32_t>& tokens,
                   int64_t C, int64_t buckets) {
  const auto N = static_cast<int64_t>(tokens.size());
  for (int64_t bucket = 0; bucket < buckets; bucket++)
    for (int64_t c = 0; c < C; c++) {
      bool held = false;
      int32_t held_token = 0;
      float acc = 0.0f;
      for (int64_t base = 0; base < N; base += kEncoderTokenTile)
        for (int64_t j = base; j < N && j < base + kEncoderTokenTile; j++) {
          const int32_t t = tokens[static_cast<size_t>(j)];
          if (encoder_bucket_of(t, buckets) != bucket) continue;
          if (!held || t != held_token) {
            if (held) dwte[static_cast<size_t>(held_token * C + c)] = acc;
            held = true;
            held_token = t;
            acc = dwte[static_cast<size_t>(t * C + c)];
          }
          acc += dout[static_cast<size_t>(j * C + c)];
        }
      if (held) dwte[static_cast<size_t>(held_token * C + c)] = acc;
    }
}

}  // namespace

TEST_CASE("cuda tiling: encoder bucket counts") {
  for (int64_t C : {1, 31, 32, 33, 64, 768, 1024, 2048, 8192, 100000}) {
    const int64_t k = encoder_buckets(C);
    INFO("C=" << C);
    CHECK(k % kEncoderWarpsPerBlock == 0);
    CHECK(k >= 8);
    CHECK(k <= 256);
  }
  CHECK(encoder_buckets(768) * 24 >= kEncoderTargetWarps - 8 * 24);
  for (int32_t t : {0, 1, 7, 255, 50256}) {
    const int64_t b = encoder_bucket_of(t, 88);
    CHECK(b >= 0);
    CHECK(b < 88);
  }
}

TEST_CASE("cuda tiling: bucketed dwte walk equals the CPU encoder backward bit for bit") {
  hw::Rng rng(921);
  struct Case {
    int64_t B, T, C, V;
  };
  // Positions spanning several token tiles; a tiny vocabulary (long runs of a token in a
  // bucket) and a large one; bucket counts below, at and above the vocabulary size.
  for (const Case cs : {Case{3, 1100, 5, 3}, Case{2, 700, 33, 40}, Case{1, 2500, 8, 5000}}) {
    const int64_t N = cs.B * cs.T;
    std::vector<int32_t> tokens(static_cast<size_t>(N));
    for (auto& t : tokens) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(cs.V)));
    for (int64_t j = 100; j < 160; j++) tokens[static_cast<size_t>(j)] = 1;  // a run of one token
    std::vector<float> dout(static_cast<size_t>(N * cs.C)), dwte0(static_cast<size_t>(cs.V * cs.C));
    for (auto& v : dout) v = static_cast<float>(rng.normal());
    for (auto& v : dwte0) v = static_cast<float>(rng.normal());
    std::vector<float> ref = dwte0;
    hw::cpu::encoder_backward<float>(ref.data(), nullptr, dout.data(), tokens.data(), cs.B, cs.T, cs.C);
    for (int64_t buckets : {int64_t{8}, encoder_buckets(cs.C), int64_t{256}}) {
      std::vector<float> mine = dwte0;
      simulate_dwte(mine, dout, tokens, cs.C, buckets);
      INFO("B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " V=" << cs.V << " buckets=" << buckets);
      CHECK(std::memcmp(mine.data(), ref.data(), mine.size() * sizeof(float)) == 0);
    }
  }
}

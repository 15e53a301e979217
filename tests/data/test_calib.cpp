// CalibSampler: windows are pure functions of (files, T, seed, index), uniform over starts.
#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/data/shards.hpp"

using hw::data::CalibSampler;

namespace {

constexpr int64_t T = 8;

std::vector<uint16_t> iota_tokens(int64_t n, uint16_t first) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint16_t>(first + i);
  return v;
}

struct Window {
  std::vector<int32_t> in = std::vector<int32_t>(T), tg = std::vector<int32_t>(T);
};
Window draw(const CalibSampler& s, int64_t index) {
  Window w;
  s.fetch(index, w.in.data(), w.tg.data());
  return w;
}

}  // namespace

TEST_CASE("calibration windows are valid, reproducible, seed-dependent and size-weighted") {
  hw::test::TempDir dir;
  // Shard a: 100 + T tokens -> 100 starts; shard b: 300 + T tokens -> 300 starts;
  // shard c is too short for any window and must never be drawn.
  hw::data::write_shard(dir.file("a.bin"), iota_tokens(100 + T, 0));
  hw::data::write_shard(dir.file("b.bin"), iota_tokens(300 + T, 10000));
  hw::data::write_shard(dir.file("c.bin"), iota_tokens(T, 30000));
  const std::string glob = dir.file("*.bin");
  CalibSampler s(glob, T, 42);

  const int64_t n = 8000;
  int64_t in_b = 0;
  std::vector<int64_t> hits_a(100, 0);
  for (int64_t i = 0; i < n; ++i) {
    const Window w = draw(s, i);
    const int32_t start = w.in[0];
    for (int64_t t = 0; t < T; ++t) {  // T+1 consecutive tokens of one shard
      CHECK(w.in[static_cast<size_t>(t)] == start + t);
      CHECK(w.tg[static_cast<size_t>(t)] == start + t + 1);
    }
    const bool a = start >= 0 && start < 100;
    const bool b = start >= 10000 && start < 10300;
    REQUIRE((a || b));
    in_b += b ? 1 : 0;
    if (a) ++hits_a[static_cast<size_t>(start)];
  }
  // Expected share of shard b: 300 / 400 = 0.75; binomial sd ~0.005 at n = 8000.
  CHECK(static_cast<double>(in_b) / n == Approx(0.75).margin(0.03));
  // Uniform inside a shard: every one of a's 100 starts is drawn (expected ~20 each).
  for (int64_t h : hits_a) CHECK(h > 0);

  // Same (seed, index) -> same window, whatever was drawn or fetched before.
  CalibSampler fresh(glob, T, 42);
  hw::data::TokenLoader loader(glob, 1, T, true, 42);
  std::vector<int32_t> bi(T), bt(T);
  for (int64_t i = 0; i < 20; ++i) loader.fetch(i, bi.data(), bt.data());
  CHECK(draw(fresh, 5000).in == draw(s, 5000).in);
  CHECK(draw(fresh, 3).in == draw(s, 3).in);

  CalibSampler other(glob, T, 43);
  int same = 0;
  for (int64_t i = 0; i < 50; ++i) same += draw(other, i).in == draw(s, i).in ? 1 : 0;
  CHECK(same < 5);  // P(same start) = 1/400 per window
}

TEST_CASE("calibration sampler rejects data without a full window") {
  hw::test::TempDir dir;
  hw::data::write_shard(dir.file("a.bin"), iota_tokens(T, 0));
  try {
    CalibSampler s(dir.file("*.bin"), T, 1);
    FAIL("no error");
  } catch (const hw::Error& e) {
    CHECK(std::string(e.what()).find(dir.file("*.bin")) != std::string::npos);
  }
}

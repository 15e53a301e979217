// shard_range against a naive owner rule: element i belongs to rank i / ceil(n / world).
#include <catch2/catch.hpp>

#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"

using hw::dist::shard_range;

TEST_CASE("shard_range covers 0..n exactly, in rank order, for awkward sizes") {
  for (std::int64_t n : {0, 1, 2, 3, 5, 7, 13, 64, 97, 1000, 1001}) {
    for (int world : {1, 2, 3, 4, 5, 7, 8, 16}) {
      INFO("n=" << n << " world=" << world);
      const std::int64_t chunk = (n + world - 1) / world;
      std::int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const auto s = shard_range(n, r, world);
        REQUIRE(s.begin == next);  // contiguous: no gap, no overlap
        REQUIRE(s.size() >= 0);
        REQUIRE(s.size() <= chunk);
        for (std::int64_t i = s.begin; i < s.end; ++i) REQUIRE(i / chunk == r);
        next = s.end;
      }
      REQUIRE(next == n);
    }
  }
}

TEST_CASE("shard_range sizes for a small example") {
  // n = 5 over 4 ranks: ceil(5/4) = 2, so 2, 2, 1, 0.
  REQUIRE(shard_range(5, 0, 4).size() == 2);
  REQUIRE(shard_range(5, 1, 4).size() == 2);
  REQUIRE(shard_range(5, 2, 4).begin == 4);
  REQUIRE(shard_range(5, 2, 4).size() == 1);
  REQUIRE(shard_range(5, 3, 4).begin == 5);
  REQUIRE(shard_range(5, 3, 4).size() == 0);
  // Counts beyond 32 bits stay exact.
  const std::int64_t big = (std::int64_t{1} << 33) + 3;
  REQUIRE(shard_range(big, 1, 2).begin == (std::int64_t{1} << 32) + 2);
  REQUIRE(shard_range(big, 1, 2).end == big);
}

TEST_CASE("shard_range rejects a bad rank, world or count") {
  REQUIRE_THROWS_AS(shard_range(10, 0, 0), hw::Error);
  REQUIRE_THROWS_AS(shard_range(10, 2, 2), hw::Error);
  REQUIRE_THROWS_AS(shard_range(10, -1, 2), hw::Error);
  REQUIRE_THROWS_AS(shard_range(-1, 0, 2), hw::Error);
}

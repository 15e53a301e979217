// TokenLoader: natural order against the spec's arithmetic, shuffle as a seeded permutation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "support/temp_dir.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/data/shards.hpp"

using hw::data::TokenLoader;

namespace {

constexpr int64_t B = 2, T = 4;
// Shard 0 holds tokens 0..n0-1, shard 1 holds 1000..1000+n1-1, so every token says where it
// came from. n0 = 2*B*T + 5: two micro-batches plus a tail too short for a third.
// n1 = B*T + 1: exactly one micro-batch.
constexpr int64_t n0 = 2 * B * T + 5, n1 = B * T + 1;

std::vector<uint16_t> iota_tokens(int64_t n, uint16_t first) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint16_t>(first + i);
  return v;
}

struct Corpus {
  hw::test::TempDir dir;
  std::string glob;
  Corpus() {
    hw::data::write_shard(dir.file("train_000000.bin"), iota_tokens(n0, 0));
    hw::data::write_shard(dir.file("train_000001.bin"), iota_tokens(n1, 1000));
    hw::data::write_shard(dir.file("val_000000.bin"), iota_tokens(50, 5000));  // must not match
    glob = dir.file("train_*.bin");
  }
};

struct Batch {
  std::vector<int32_t> in, tg;
};
Batch fetch(const TokenLoader& l, int64_t index, int64_t b = B, int64_t t = T) {
  Batch x{std::vector<int32_t>(static_cast<size_t>(b * t)), std::vector<int32_t>(static_cast<size_t>(b * t))};
  l.fetch(index, x.in.data(), x.tg.data());
  return x;
}

// The first input token of each sequence in a batch identifies the sequence.
std::vector<int32_t> sequence_starts(const Batch& x) {
  std::vector<int32_t> s;
  for (int64_t j = 0; j < B; ++j) s.push_back(x.in[static_cast<size_t>(j * T)]);
  return s;
}

}  // namespace

TEST_CASE("shuffle off: micro-batches are consecutive B*T+1 token spans, shard by shard") {
  Corpus c;
  TokenLoader l(c.glob, B, T, false, 7);
  CHECK(l.files().size() == 2);
  CHECK(l.total_tokens() == n0 + n1);
  REQUIRE(l.batches_per_epoch() == 3);  // 2 from shard 0 (tail skipped), 1 from shard 1

  // Spec: batch i of a shard = inputs tokens[i*B*T, +B*T), targets shifted by one.
  const int64_t base[3] = {0, B * T, 1000};
  for (int64_t i = 0; i < 3; ++i) {
    const Batch x = fetch(l, i);
    for (int64_t k = 0; k < B * T; ++k) {
      CHECK(x.in[static_cast<size_t>(k)] == base[i] + k);
      CHECK(x.tg[static_cast<size_t>(k)] == base[i] + k + 1);
    }
  }
  // Epochs wrap around to the same order.
  CHECK(fetch(l, 3).in == fetch(l, 0).in);
  CHECK(fetch(l, 5).tg == fetch(l, 2).tg);
}

TEST_CASE("shuffle on: each sequence exactly once per epoch, seeded and reproducible") {
  Corpus c;
  TokenLoader a(c.glob, B, T, true, 1337);
  TokenLoader a2(c.glob, B, T, true, 1337);
  TokenLoader other(c.glob, B, T, true, 1338);
  const int64_t nb = a.batches_per_epoch();
  REQUIRE(nb == 3);

  // The slot set is the shuffle-off set: starts 0,4,8,12 in shard 0, 1000,1004 in shard 1.
  const std::multiset<int32_t> expected = {0, 4, 8, 12, 1000, 1004};
  auto epoch_starts = [&](const TokenLoader& l, int64_t epoch) {
    std::vector<int32_t> order;
    for (int64_t i = 0; i < nb; ++i) {
      const Batch x = fetch(l, epoch * nb + i);
      // Every sequence is T+1 consecutive tokens of one shard.
      for (int64_t j = 0; j < B; ++j)
        for (int64_t t = 0; t < T; ++t) {
          const auto k = static_cast<size_t>(j * T + t);
          CHECK(x.in[k] == x.in[static_cast<size_t>(j * T)] + t);
          CHECK(x.tg[k] == x.in[k] + 1);
        }
      for (int32_t s : sequence_starts(x)) order.push_back(s);
    }
    return order;
  };
  const auto e0 = epoch_starts(a, 0);
  const auto e1 = epoch_starts(a, 1);
  CHECK(std::multiset<int32_t>(e0.begin(), e0.end()) == expected);
  CHECK(std::multiset<int32_t>(e1.begin(), e1.end()) == expected);
  CHECK(e0 == epoch_starts(a2, 0));
  CHECK(e1 == epoch_starts(a2, 1));

  // Fetching out of order (epoch 1 first, then back to 0) changes nothing.
  TokenLoader b(c.glob, B, T, true, 1337);
  const Batch late = fetch(b, nb + 2);
  CHECK(sequence_starts(fetch(b, 0)) == std::vector<int32_t>(e0.begin(), e0.begin() + B));
  CHECK(sequence_starts(late) == std::vector<int32_t>(e1.begin() + 2 * B, e1.end()));

  // 6! = 720 orders: over a few epochs, seeds and epochs must not all coincide.
  bool differs_by_seed = false, differs_by_epoch = false;
  for (int64_t e = 0; e < 4; ++e) {
    differs_by_seed |= epoch_starts(a, e) != epoch_starts(other, e);
    differs_by_epoch |= epoch_starts(a, e) != epoch_starts(a, e + 1);
  }
  CHECK(differs_by_seed);
  CHECK(differs_by_epoch);
}

TEST_CASE("shuffle on a larger corpus is a genuine permutation") {
  hw::test::TempDir dir;
  hw::data::write_shard(dir.file("s0.bin"), iota_tokens(4001, 0));
  TokenLoader l(dir.file("s*.bin"), 1, 4, true, 3);  // 1000 sequences, one per batch
  REQUIRE(l.batches_per_epoch() == 1000);
  std::vector<int32_t> starts;
  int64_t fixed_points = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const Batch x = fetch(l, i, 1, 4);
    starts.push_back(x.in[0]);
    fixed_points += x.in[0] == 4 * i ? 1 : 0;
  }
  std::vector<int32_t> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) CHECK(sorted[static_cast<size_t>(i)] == 4 * i);
  CHECK(fixed_points < 10);  // a uniform permutation has ~1 fixed point
}

TEST_CASE("loader errors name the glob, B, T and the token count") {
  Corpus c;
  try {
    TokenLoader l(c.glob, 4, 8, false, 0);  // needs 33 tokens in one shard; largest has 21
    FAIL("no error");
  } catch (const hw::Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find(c.glob) != std::string::npos);
    CHECK(msg.find("B=4") != std::string::npos);
    CHECK(msg.find("T=8") != std::string::npos);
    CHECK(msg.find("21") != std::string::npos);
  }
  CHECK_THROWS_AS(TokenLoader(c.dir.file("nothing_*.bin"), B, T, false, 0), hw::Error);
  TokenLoader l(c.glob, B, T, false, 0);
  std::vector<int32_t> buf(B * T);
  CHECK_THROWS_AS(l.fetch(-1, buf.data(), buf.data()), hw::Error);
}

// Collectives against closed-form sums of rank-dependent values. Every value is a small integer
// or a multiple of 1/2, so the expected sums are exact in float whatever order MPI adds in.
// Each case runs on LocalComm, on the process communicator, and on the process communicator
// with a 3-element limit so that the piecewise (large-count) paths run too; with
// HEADWISE_TEST_NCCL=1 on a GPU node also on the NCCL communicator, float buffers and
// broadcast bytes in device memory, the double sums and maxima in host memory (its staged
// path), all_equal on both.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "dist/process_comm.hpp"
#include "headwise/core/error.hpp"

using namespace hw::dist;

namespace {

using test::all_comms;
using test::on_comm_memory;

// Rank r's value at index i; the sum over ranks is (i + 1) * W (W + 1) / 2 + W (W - 1) / 4.
float contribution(int r, std::int64_t i) {
  return static_cast<float>((r + 1) * (i % 1000 + 1)) + (r % 2 == 1 ? 0.5f : 0.0f);
}
float expected_sum(int world, std::int64_t i) {
  const int odd_ranks = world / 2;
  return static_cast<float>((i % 1000 + 1) * world * (world + 1) / 2) + 0.5f * static_cast<float>(odd_ranks);
}

const std::int64_t kSizes[] = {0, 1, 2, 3, 7, 1001};

}  // namespace

TEST_CASE("allreduce_sum (float) equals the closed-form sum over ranks") {
  for (auto& comm : all_comms()) {
    for (std::int64_t n : kSizes) {
      INFO(comm->name() << " world=" << comm->world() << " n=" << n);
      std::vector<float> x(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) x[i] = contribution(comm->rank(), i);
      on_comm_memory(*comm, x, [&](float* p) { comm->allreduce_sum(p, n); });
      int bad = 0;
      for (std::int64_t i = 0; i < n; ++i) bad += x[i] != expected_sum(comm->world(), i);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("allreduce_sum (double) and allreduce_max equal their closed forms") {
  for (auto& comm : all_comms()) {
    const int w = comm->world();
    INFO(comm->name() << " world=" << w);
    std::vector<double> x(11);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25 * comm->rank() + 1e10 * static_cast<double>(i);
    comm->allreduce_sum(x.data(), static_cast<std::int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == 0.125 * w * (w - 1) + 1e10 * static_cast<double>(i) * w);
    // The maximum sits on the last rank for an increasing value, on rank 0 for a decreasing one.
    CHECK(comm->allreduce_max(3.0 * comm->rank() - 1.0) == 3.0 * (w - 1) - 1.0);
    CHECK(comm->allreduce_max(-2.5 * comm->rank()) == 0.0);
    comm->barrier();
  }
}

TEST_CASE("broadcast copies the root's bytes to every rank") {
  for (auto& comm : all_comms()) {
    const int root = comm->world() - 1;
    INFO(comm->name() << " world=" << comm->world() << " root=" << root);
    std::vector<unsigned char> buf(1001);
    for (std::size_t i = 0; i < buf.size(); ++i)
      buf[i] = comm->rank() == root ? static_cast<unsigned char>(i * 7 + 3) : 0;
    on_comm_memory(*comm, buf, [&](unsigned char* p) { comm->broadcast(p, static_cast<std::int64_t>(buf.size()), root); });
    int bad = 0;
    for (std::size_t i = 0; i < buf.size(); ++i) bad += buf[i] != static_cast<unsigned char>(i * 7 + 3);
    CHECK(bad == 0);
    CHECK_THROWS_AS(comm->broadcast(buf.data(), 1, comm->world()), hw::Error);
  }
}

TEST_CASE("reduce_scatter_sum then all_gather equals allreduce_sum") {
  for (auto& comm : all_comms()) {
    for (std::int64_t n : kSizes) {
      INFO(comm->name() << " world=" << comm->world() << " n=" << n);
      std::vector<float> x(static_cast<std::size_t>(n)), reduced;
      for (std::int64_t i = 0; i < n; ++i) x[i] = contribution(comm->rank(), i);
      reduced = x;
      on_comm_memory(*comm, reduced, [&](float* p) { comm->allreduce_sum(p, n); });

      on_comm_memory(*comm, x, [&](float* p) { comm->reduce_scatter_sum(p, n); });
      const Range own = shard_range(n, comm->rank(), comm->world());
      int bad_shard = 0;
      for (std::int64_t i = own.begin; i < own.end; ++i)
        bad_shard += x[i] != reduced[i] || x[i] != expected_sum(comm->world(), i);
      CHECK(bad_shard == 0);

      // Spoil everything outside the own shard: all_gather must fill it from the other ranks.
      for (std::int64_t i = 0; i < n; ++i)
        if (i < own.begin || i >= own.end) x[i] = -1.0f;
      on_comm_memory(*comm, x, [&](float* p) { comm->all_gather(p, n); });
      int bad = 0;
      for (std::int64_t i = 0; i < n; ++i) bad += x[i] != reduced[i] || x[i] != expected_sum(comm->world(), i);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("all_equal is true for identical bytes and false everywhere when one rank differs") {
  for (auto& comm : all_comms()) {
    INFO(comm->name() << " world=" << comm->world());
    std::vector<int> heads{0, 3, 5, 11, 2};
    const auto bytes = static_cast<std::int64_t>(heads.size() * sizeof(int));
    CHECK(comm->all_equal(heads.data(), bytes));
    CHECK(comm->all_equal(nullptr, 0));
    on_comm_memory(*comm, heads, [&](int* p) { CHECK(comm->all_equal(p, bytes)); });
    if (comm->world() > 1) {
      std::vector<int> mine = heads;
      if (comm->rank() == comm->world() - 1) mine[2] = 6;  // one head differs on the last rank
      CHECK_FALSE(comm->all_equal(mine.data(), bytes));
      on_comm_memory(*comm, mine, [&](int* p) { CHECK_FALSE(comm->all_equal(p, bytes)); });
      // A shorter list on rank 0 only (same leading bytes) is a difference too.
      const std::int64_t len = comm->rank() == 0 ? bytes - static_cast<std::int64_t>(sizeof(int)) : bytes;
      CHECK_FALSE(comm->all_equal(heads.data(), len));
    }
  }
}

TEST_CASE("bytes_hash is FNV-1a 64 of the bytes followed by the length") {
  // An independent FNV-1a, checked against the published value for "a".
  auto fnv1a = [](const std::vector<unsigned char>& b) {
    std::uint64_t h = 14695981039346656037ULL;
    for (unsigned char c : b) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return h;
  };
  REQUIRE(fnv1a({'a'}) == 0xaf63dc4c8601ec8cULL);
  const std::string s = "heads 0 3 5";
  std::vector<unsigned char> b(s.begin(), s.end());
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>((s.size() >> (8 * i)) & 0xff));
  REQUIRE(bytes_hash(s.data(), static_cast<std::int64_t>(s.size())) == fnv1a(b));
  const char zero = 0;
  REQUIRE(bytes_hash(&zero, 1) != bytes_hash(&zero, 0));
}

TEST_CASE("collectives reject negative counts and null buffers") {
  for (auto& comm : all_comms()) {
    INFO(comm->name());
    float f = 0;
    CHECK_THROWS_AS(comm->allreduce_sum(&f, -1), hw::Error);
    CHECK_THROWS_AS(comm->allreduce_sum(static_cast<float*>(nullptr), 4), hw::Error);
    CHECK_THROWS_AS(comm->reduce_scatter_sum(&f, -2), hw::Error);
    CHECK_THROWS_AS(comm->all_gather(nullptr, 3), hw::Error);
    CHECK_THROWS_AS(comm->all_equal(&f, -1), hw::Error);
  }
}

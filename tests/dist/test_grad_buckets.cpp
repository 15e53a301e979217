// GradBuckets: the bucket plan of a small layout worked out by hand; bucketed asynchronous sums
// over random data in several layouts against one blocking allreduce_sum of the whole block and
// against a naive sum of every rank's floats; the hook-order errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dist/process_comm.hpp"
#include "dist/rank_floats.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/grad_buckets.hpp"

using namespace hw::dist;
using test::all_comms;
using test::max_rel_diff;
using test::naive_sum;
using test::on_comm_memory;
using test::rank_floats;
using test::same_bits;

namespace {

struct Layout {
  const char* name;
  std::int64_t count;
  std::vector<Range> layers;
};

// Layer ranges as a model lays them out (embeddings, layers 0..L-1, final norm) and odder ones.
std::vector<Layout> layouts() {
  std::vector<Layout> out;
  {  // prefix 37 floats, 6 layers of mixed sizes back to back, suffix 11
    Layout l{"contiguous", 0, {}};
    std::int64_t at = 37;
    for (std::int64_t size : {50, 120, 8, 64, 200, 31}) {
      l.layers.push_back({at, at + size});
      at += size;
    }
    l.count = at + 11;
    out.push_back(l);
  }
  // Gaps (padding) between layers, an empty layer, layer 0 at the end of the block.
  out.push_back({"gaps, empty layer, reversed", 400, {{330, 390}, {250, 300}, {200, 200}, {100, 190}, {3, 90}}});
  out.push_back({"no layers", 123, {}});
  out.push_back({"layers cover the block", 90, {{0, 40}, {40, 41}, {41, 90}}});
  return out;
}

// Block bytes small enough that these give one bucket per layer, a few buckets, one bucket.
const std::int64_t kMinBytes[] = {0, 4 * 100, std::int64_t{1} << 40};

// One step: hooks L-1..0 and -1 (or only the first `hooks` of them), then finish.
void run_step(GradBuckets& b, int hooks) {
  int done = 0;
  for (int l = b.layers() - 1; l >= -1 && done < hooks; --l, ++done) b.on_ready(l);
  b.finish();
}

}  // namespace

TEST_CASE("GradBuckets groups layers in readiness order up to the minimum size") {
  LocalComm comm;
  std::vector<float> block(100);
  // Layers (floats): 0 = [10,30), 1 = [30,50), 2 = [50,60), 3 = [60,90); minimum 100 bytes = 25
  // floats. In readiness order: layer 3 (30 floats) fills bucket 0; layer 2 (10) is too small
  // alone, with layer 1 (20) it makes bucket 1 = [30, 60); layer 0 (20) is the last, bucket 2;
  // the rest [0,10) and [90,100) is bucket 3.
  GradBuckets b(comm, block.data(), 100, {{10, 30}, {30, 50}, {50, 60}, {60, 90}}, 100);
  REQUIRE(b.buckets() == 4);
  auto ranges = [&](int k) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (const Range& r : b.bucket_ranges(k)) out.emplace_back(r.begin, r.end);
    return out;
  };
  using P = std::vector<std::pair<std::int64_t, std::int64_t>>;
  CHECK(ranges(0) == P{{60, 90}});
  CHECK(ranges(1) == P{{30, 60}});
  CHECK(ranges(2) == P{{10, 30}});
  CHECK(ranges(3) == P{{0, 10}, {90, 100}});
  CHECK(b.bucket_of(3) == 0);
  CHECK(b.bucket_of(2) == 1);
  CHECK(b.bucket_of(1) == 1);
  CHECK(b.bucket_of(0) == 2);
  CHECK(b.bucket_of(-1) == 3);
  // Minimum 0: one bucket per layer; huge: all layers in one bucket, coalesced to [10, 90).
  GradBuckets per_layer(comm, block.data(), 100, {{10, 30}, {30, 50}, {50, 60}, {60, 90}}, 0);
  CHECK(per_layer.buckets() == 5);
  GradBuckets one(comm, block.data(), 100, {{10, 30}, {30, 50}, {50, 60}, {60, 90}}, std::int64_t{1} << 40);
  REQUIRE(one.buckets() == 2);
  CHECK(one.bucket_ranges(0).size() == 1);
  CHECK(one.bucket_ranges(0)[0].begin == 10);
  CHECK(one.bucket_ranges(0)[0].end == 90);
}

TEST_CASE("bucketed asynchronous sums equal one blocking allreduce_sum of the block") {
  for (auto& comm : all_comms()) {
    const int w = comm->world();
    unsigned salt = 0;
    for (const Layout& lay : layouts()) {
      for (std::int64_t min_bytes : kMinBytes) {
        ++salt;
        INFO(comm->name() << " world=" << w << " layout=" << lay.name << " min_bytes=" << min_bytes);
        std::vector<float> whole = rank_floats(comm->rank(), lay.count, salt);
        std::vector<float> bucketed = whole, partial = whole, twice = whole;
        on_comm_memory(*comm, whole, [&](float* p) { comm->allreduce_sum(p, lay.count); });
        on_comm_memory(*comm, bucketed, [&](float* p) {
          GradBuckets b(*comm, p, lay.count, lay.layers, min_bytes);
          run_step(b, b.layers() + 1);
        });
        // Only some hooks before finish (e.g. backward stopped early): finish starts the rest.
        on_comm_memory(*comm, partial, [&](float* p) {
          GradBuckets b(*comm, p, lay.count, lay.layers, min_bytes);
          run_step(b, b.layers() / 2);
        });
        const std::vector<float> naive = naive_sum(w, lay.count, salt);
        if (w <= 2) {
          CHECK(same_bits(bucketed, whole));
          CHECK(same_bits(bucketed, naive));
          CHECK(same_bits(partial, whole));
        } else {  // see mpi_comm.hpp: the blocking and non-blocking sums may round differently
          CHECK(max_rel_diff(bucketed, naive) < 1e-5);
          CHECK(max_rel_diff(partial, naive) < 1e-5);
        }
        // The same object for two steps: the second step sums the first step's sums again.
        on_comm_memory(*comm, twice, [&](float* p) {
          GradBuckets b(*comm, p, lay.count, lay.layers, min_bytes);
          run_step(b, b.layers() + 1);
          run_step(b, b.layers() + 1);
        });
        std::vector<float> expect = naive;
        for (float& x : expect) x *= static_cast<float>(w);  // exact: w is 1 or 2 in CI
        if (w <= 2) CHECK(same_bits(twice, expect));
      }
    }
  }
}

TEST_CASE("GradBuckets: out-of-order and repeated hooks are errors that start nothing") {
  for (auto& comm : all_comms()) {
    INFO(comm->name() << " world=" << comm->world());
    const Layout lay = layouts()[0];  // 6 layers
    std::vector<float> x = rank_floats(comm->rank(), lay.count, 99);
    on_comm_memory(*comm, x, [&](float* p) {
      GradBuckets b(*comm, p, lay.count, lay.layers, 0);  // one bucket per layer
      CHECK_THROWS_WITH(b.on_ready(3), Catch::Contains("layer 3 reported ready before layer 5"));
      CHECK_THROWS_WITH(b.on_ready(-1), Catch::Contains("the rest (-1) reported ready before layer 5"));
      b.on_ready(5);
      CHECK_THROWS_WITH(b.on_ready(5), Catch::Contains("layer 5 reported ready twice"));
      b.on_ready(4);
      CHECK_THROWS_WITH(b.on_ready(6), Catch::Contains("outside [-1, 6)"));
      CHECK_THROWS_WITH(b.on_ready(-2), Catch::Contains("outside [-1, 6)"));
      for (int l = 3; l >= -1; --l) b.on_ready(l);
      CHECK_THROWS_WITH(b.on_ready(-1), Catch::Contains("the rest (-1) reported ready twice"));
      CHECK_THROWS_WITH(b.on_ready(0), Catch::Contains("layer 0 reported ready twice"));
      b.finish();  // the rejected calls started nothing: every rank's collectives still match
    });
    if (comm->world() <= 2) CHECK(same_bits(x, naive_sum(comm->world(), lay.count, 99)));
  }
}

TEST_CASE("GradBuckets rejects bad ranges and averages only host blocks") {
  LocalComm comm;
  std::vector<float> block(50, 1.0f);
  CHECK_THROWS_WITH(GradBuckets(comm, block.data(), 50, {{0, 10}, {40, 51}}),
                    Catch::Contains("layer 1 range [40, 51) is not inside the gradient block [0, 50)"));
  CHECK_THROWS_WITH(GradBuckets(comm, block.data(), 50, {{5, 3}}), Catch::Contains("layer 0 range [5, 3)"));
  CHECK_THROWS_WITH(GradBuckets(comm, block.data(), 50, {{0, 10}, {20, 30}, {9, 12}}),
                    Catch::Contains("layers 0 and 2 overlap"));
  CHECK_THROWS_WITH(GradBuckets(comm, nullptr, 50, {}), Catch::Contains("null gradient block"));
  CHECK_THROWS_WITH(GradBuckets(comm, block.data(), 50, {}, -1), Catch::Contains("min_bucket_bytes -1"));

  // average: the sums times 1/world, as floats. With the process communicator's world w the
  // block of ones sums to w and averages back to exactly 1.
  auto proc = test::process_comm();
  std::vector<float> ones(77, 1.0f);
  GradBuckets avg(*proc, ones.data(), 77, {{10, 40}, {40, 60}}, 0);
  avg.finish(true);
  int bad = 0;
  for (float v : ones) bad += v != 1.0f;
  CHECK(bad == 0);
  std::vector<float> threes(77, 3.0f);
  GradBuckets sum(*proc, threes.data(), 77, {{10, 40}, {40, 60}}, 0);
  sum.finish();
  bad = 0;
  for (float v : threes) bad += v != 3.0f * static_cast<float>(proc->world());
  CHECK(bad == 0);

  // A GPU communicator's block is device memory: averaging there is refused before anything
  // starts (checked on every rank alike, so no collective is left unmatched).
  if (auto nccl = test::nccl_comm()) {
    std::vector<float> dev_block(16, 1.0f);
    on_comm_memory(*nccl, dev_block, [&](float* p) {
      GradBuckets b(*nccl, p, 16, {{0, 8}}, 0);
      CHECK_THROWS_WITH(b.finish(true), Catch::Contains("averaging device gradients"));
      b.finish();
    });
    CHECK(dev_block[0] == static_cast<float>(nccl->world()));
  }
}

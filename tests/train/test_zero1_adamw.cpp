// The sharded (ZeRO-1) AdamW against the full one: on each rank's shard of the parameter block
// it must produce the same parameters and moments bit for bit, while holding only the shard.
#include <catch2/catch.hpp>
#include <cstring>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/optim/adamw.hpp"

using namespace hw;

namespace {

// Tensors of rank 1 and 2 (decayed or not) whose sizes are not multiples of the 64-byte
// alignment, so shard boundaries fall inside tensors and inside padding.
void declare_model(Arena& a) {
  a.declare("wte", {13, 7});
  a.declare("ln.w", {7});
  a.declare("attn.w", {7, 21});
  a.declare("attn.b", {21});
  a.declare("mlp.w", {5, 3, 4});
}

void fill_normal(Arena& a, Rng& rng) {
  for (const auto& t : a.tensors())
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = float(rng.normal());
}

const float* block(const Arena& a) { return static_cast<const float*>(a.base()); }
int64_t block_floats(const Arena& a) { return int64_t(a.bytes() / sizeof(float)); }

bool same_bits(const float* a, const float* b, int64_t n) {
  return n == 0 || std::memcmp(a, b, size_t(n) * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sharded AdamW equals the full AdamW on every shard, bit for bit", "[optim][zero1]") {
  const int world = GENERATE(2, 3);
  Arena params("p"), grads("g");
  declare_model(params);
  declare_model(grads);
  params.allocate();
  grads.allocate();
  Rng rng(11);
  fill_normal(params, rng);
  const int64_t n = block_floats(params);
  const std::vector<float> initial(block(params), block(params) + n);

  const AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  AdamW full(cfg, cpu_backend<float>(), params);
  // One parameter copy and one sharded optimizer per rank.
  std::vector<std::unique_ptr<Arena>> rank_params;
  std::vector<std::unique_ptr<AdamW>> rank_opt;
  std::vector<dist::Range> shards;
  for (int r = 0; r < world; ++r) {
    shards.push_back(dist::shard_range(n, r, world));
    rank_params.push_back(arena_like(params, "rank.p"));
    std::memcpy(rank_params.back()->base(), params.base(), params.bytes());
    rank_opt.push_back(std::make_unique<AdamW>(cfg, cpu_backend<float>(), *rank_params.back(),
                                               BlockShard{shards[r].begin, shards[r].end}));
  }
  for (int step = 1; step <= 6; ++step) {
    fill_normal(grads, rng);
    const double lr = 3e-2 / step;
    full.step(params, grads, lr, step);
    for (int r = 0; r < world; ++r)
      rank_opt[r]->step_range(*rank_params[r], grads, lr, step, shards[r].begin, shards[r].end);
    for (int r = 0; r < world; ++r) {
      const dist::Range s = shards[r];
      INFO("world " << world << ", rank " << r << ", shard [" << s.begin << ", " << s.end << "), step " << step);
      CHECK(same_bits(block(*rank_params[r]) + s.begin, block(params) + s.begin, s.size()));
      CHECK(same_bits(block(rank_opt[r]->m()), block(full.m()) + s.begin, s.size()));
      CHECK(same_bits(block(rank_opt[r]->v()), block(full.v()) + s.begin, s.size()));
      // Outside its shard a rank changes nothing (ZeRO-1 all-gathers the rest from the others).
      CHECK(same_bits(block(*rank_params[r]), initial.data(), s.begin));
      CHECK(same_bits(block(*rank_params[r]) + s.end, initial.data() + s.end, n - s.end));
    }
  }
  // The full optimizer really moved the parameters (the comparison is not between no-ops).
  CHECK_FALSE(same_bits(block(params), initial.data(), n));

  // Memory: each rank holds only its shard, so the ranks together hold one full copy.
  size_t total = 0;
  for (int r = 0; r < world; ++r) {
    const AdamW& o = *rank_opt[r];
    CHECK(o.sharded());
    CHECK(o.m().numel() == shards[r].size());
    CHECK(o.v().numel() == shards[r].size());
    CHECK(o.bytes() <= 2 * (size_t(shards[r].size()) * sizeof(float) + 64));  // one 64-byte pad per arena
    CHECK(double(o.bytes()) <= double(full.bytes()) / world + 128.0);
    total += o.bytes();
  }
  CHECK(full.bytes() == 2 * params.bytes());
  CHECK(total <= full.bytes() + size_t(world) * 128);
}

TEST_CASE("sharded AdamW rejects ranges outside its shard and full-block calls", "[optim][zero1]") {
  Arena params("p"), grads("g");
  declare_model(params);
  declare_model(grads);
  params.allocate();
  grads.allocate();
  const int64_t n = block_floats(params);
  AdamW opt(AdamWConfig{}, cpu_backend<float>(), params, BlockShard{16, 64});
  CHECK_THROWS_AS(opt.step(params, grads, 1e-3, 1), Error);
  CHECK_THROWS_AS(opt.step_range(params, grads, 1e-3, 1, 0, 64), Error);
  CHECK_THROWS_AS(opt.step_range(params, grads, 1e-3, 1, 16, 65), Error);
  CHECK_NOTHROW(opt.step_range(params, grads, 1e-3, 1, 16, 64));
  CHECK_THROWS_AS(AdamW(AdamWConfig{}, cpu_backend<float>(), params, BlockShard{0, n + 1}), Error);
  CHECK_THROWS_AS(opt.rebuild(params), Error);  // a sharded optimizer is rebuilt with a shard
  // Rebuilding for a new shard gives zeroed moments of the new size.
  opt.m().get("shard").f32()[0] = 1.0f;
  opt.rebuild(params, BlockShard{0, n});
  CHECK(opt.shard().begin == 0);
  CHECK(opt.shard().end == n);
  CHECK(opt.m().numel() == n);
  CHECK(opt.m().get("shard").f32()[0] == 0.0f);
  AdamW full(AdamWConfig{}, cpu_backend<float>(), params);
  CHECK_FALSE(full.sharded());
  CHECK_THROWS_AS(full.rebuild(params, BlockShard{0, 8}), Error);
}

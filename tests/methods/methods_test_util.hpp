#pragma once
// Shared pieces of the SAF planner/experiment tests: tiny runs on synthetic shards, a two-rank
// communicator made of threads (collectives in one process), and small readers.
#include <barrier>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/train/run_config.hpp"
#include "train/train_test_util.hpp"

namespace hw::test {

// Scratch directories of their own, so methods and train tests never share one.
inline std::string methods_dir(const std::string& name) { return temp_dir("methods_" + name); }

// A learnable token stream: a noisy periodic sequence, so heads develop position and content
// preferences within a few updates.
inline void write_stream_shard(const std::string& path, int64_t n, uint64_t seed, int vocab) {
  const std::filesystem::path p(path);
  write_text_like_shard(p.parent_path().string(), p.filename().string(), n, seed, vocab);
}

// 2 layers x 4 heads x 32 wide, T = 16: small enough for naive references, enough heads for
// a selection to mean something.
inline nlohmann::json tiny_saf_doc(const std::string& dir) {
  write_stream_shard(dir + "/train_000.bin", 6000, 1, 32);
  write_stream_shard(dir + "/val_000.bin", 2000, 2, 32);
  nlohmann::json doc = nlohmann::json::parse(R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 24, "vocab_size": 32},
    "train": {"micro_batch": 2, "seq_len": 16, "total_batch_tokens": 64, "steps": 8, "lr": 1e-2,
              "min_lr": 1e-3, "warmup_steps": 2, "eval_every": 0, "eval_batches": 2, "seed": 5,
              "checkpoint_every": 2, "threads": 1},
    "method": {"name": "saf", "ratio": 0.25, "at_step": 4, "calib_seqs": 6, "fit_steps": 60, "max_kl": 5.0}
  })");
  doc["data"] = {{"train", dir + "/train_*.bin"}, {"val", dir + "/val_*.bin"}, {"calib", dir + "/train_*.bin"}};
  return doc;
}


inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Two "ranks" as two threads of this process. Collectives meet at a barrier; sums are taken in
// rank order, so both ranks get identical results (as a real transport guarantees).
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), sync_(world), slots_(size_t(world)) {}
  int world() const { return world_; }

  void allreduce(int rank, double* data, int64_t count) {
    slots_[size_t(rank)].assign(data, data + count);
    sync_.arrive_and_wait();
    for (int64_t i = 0; i < count; ++i) {
      double s = 0.0;
      for (int r = 0; r < world_; ++r) s += slots_[size_t(r)][size_t(i)];
      data[i] = s;
    }
    sync_.arrive_and_wait();
  }
  void broadcast(int rank, void* data, int64_t bytes, int root) {
    if (rank == root) {
      auto* p = static_cast<const unsigned char*>(data);
      bytes_.assign(p, p + bytes);
    }
    sync_.arrive_and_wait();
    if (rank != root) std::memcpy(data, bytes_.data(), size_t(bytes));
    sync_.arrive_and_wait();
  }
  void barrier() { sync_.arrive_and_wait(); }

 private:
  int world_;
  std::barrier<> sync_;
  std::vector<std::vector<double>> slots_;
  std::vector<unsigned char> bytes_;
};

class ThreadComm final : public dist::Comm {
 public:
  ThreadComm(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return g_.world(); }
  int local_rank() const override { return rank_; }
  std::string name() const override { return "threads"; }
  void allreduce_sum(float* data, std::int64_t count) override {
    std::vector<double> d(data, data + count);
    g_.allreduce(rank_, d.data(), count);
    for (int64_t i = 0; i < count; ++i) data[i] = float(d[size_t(i)]);
  }
  void allreduce_sum(double* data, std::int64_t count) override { g_.allreduce(rank_, data, count); }
  double allreduce_max(double value) override {
    std::vector<double> all(size_t(g_.world()), 0.0);
    all[size_t(rank_)] = value;
    g_.allreduce(rank_, all.data(), int64_t(all.size()));
    double m = all[0];
    for (double v : all) m = std::max(m, v);
    return m;
  }
  void broadcast(void* data, std::int64_t bytes, int root) override { g_.broadcast(rank_, data, bytes, root); }
  void barrier() override { g_.barrier(); }
  void reduce_scatter_sum(float*, std::int64_t) override { fail("ThreadComm: reduce_scatter_sum not needed"); }
  void all_gather(float*, std::int64_t) override { fail("ThreadComm: all_gather not needed"); }
  [[noreturn]] void abort(int) override { fail("ThreadComm: abort"); }

 private:
  ThreadGroup& g_;
  int rank_;
};

// Runs fn(comm) on `world` threads; rethrows the first exception after all joined.
inline void run_ranks(int world, const std::function<void(dist::Comm&)>& fn) {
  ThreadGroup group(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      try {
        fn(comm);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace hw::test

#pragma once
// Small runs on synthetic shards for trainer tests.
#include <filesystem>
#include <fstream>
#include <string>

#include "headwise/core/rng.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/train/run_config.hpp"
#include "headwise/train/trainer.hpp"
#include "support/temp_dir.hpp"

namespace hw::test {

inline std::string temp_dir(const std::string& name) { return scratch_dir("train_" + name); }

// A shard of `n` tokens from a repetitive byte-like stream (learnable, not constant).
inline std::string write_text_like_shard(const std::string& dir, const std::string& name, int64_t n, uint64_t seed,
                                         int vocab) {
  Rng r(seed);
  std::vector<uint16_t> toks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) toks[size_t(i)] = uint16_t((i * 7 + int64_t(r.below(3))) % vocab);
  const std::string path = dir + "/" + name;
  data::write_shard(path, toks);
  return path;
}

inline nlohmann::json tiny_run_doc(const std::string& dir) {
  write_text_like_shard(dir, "train_000.bin", 4000, 1, 32);
  write_text_like_shard(dir, "val_000.bin", 1000, 2, 32);
  nlohmann::json doc = nlohmann::json::parse(R"({
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 32},
    "train": {"micro_batch": 2, "seq_len": 16, "total_batch_tokens": 64, "steps": 6, "lr": 1e-2,
              "min_lr": 1e-3, "warmup_steps": 2, "eval_every": 3, "eval_batches": 2, "seed": 5,
              "checkpoint_every": 3, "threads": 1},
    "data": {}
  })");
  doc["data"] = {{"train", dir + "/train_*.bin"}, {"val", dir + "/val_*.bin"}};
  return doc;
}

// tiny_run_doc with a model the CUDA attention kernels take (head_dim 64) and a mixed plan with
// a static head: the GPU (and emulated) training-step and resume tests.
inline nlohmann::json tiny_gpu_run_doc(const std::string& dir) {
  nlohmann::json doc = tiny_run_doc(dir);
  doc["model"] = nlohmann::json::parse(R"({"n_layer": 2, "n_head": 2, "n_embd": 128, "block_size": 16,
    "vocab_size": 32, "head_plan": [["softmax", "static"], ["window:4", "softmax"]]})");
  doc["train"]["device"] = "cuda";
  return doc;
}

// Per-update training losses from a run's metrics.jsonl, in order.
inline std::vector<double> losses_of(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

// The per-update losses of `cfg` run uninterrupted (in dir/full) and of the same run stopped
// after the checkpoint of step `stop` and resumed from it (in dir/part): equal lists are what
// "resume reproduces the uninterrupted run" means.
struct ResumeLosses {
  std::vector<double> full, resumed;
};
inline ResumeLosses full_and_resumed_losses(const RunConfig& cfg, const std::string& dir, int64_t stop,
                                            dist::Comm& comm) {
  {
    Trainer full(cfg, dir + "/full", comm);
    full.run();
  }
  {
    Trainer part(cfg, dir + "/part", comm);
    part.run(stop);
  }
  Trainer resumed(cfg, dir + "/part", comm);
  resumed.resume(dir + "/part/checkpoints/step_" + std::to_string(stop));
  resumed.run();
  return {losses_of(dir + "/full/metrics.jsonl"), losses_of(dir + "/part/metrics.jsonl")};
}

}  // namespace hw::test

#pragma once
// A training run's configuration: JSON sections model, train, data, method, each strict
// (unknown keys and wrong types are errors naming the key), overridable by --set.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/model/model_config.hpp"

namespace hw {

// Upper bounds on the train keys (from_json refuses more; docs/bad-input.md).
struct TrainLimits {
  static constexpr int64_t kMaxMicroBatch = int64_t(1) << 20;
  static constexpr int64_t kMaxSeqLen = ModelLimits::kMaxPositions;  // and at most model.block_size
  static constexpr int64_t kMaxMicroBatchTokens = int64_t(1) << 31;  // micro_batch * seq_len
  static constexpr int64_t kMaxBatchTokens = int64_t(1) << 48;       // total_batch_tokens
  static constexpr int64_t kMaxSteps = int64_t(1) << 40;             // steps and every step interval
};

struct TrainConfig {
  int64_t micro_batch = 8;
  int64_t seq_len = 256;
  int64_t total_batch_tokens = 0;  // 0 = micro_batch * seq_len (no accumulation)
  int64_t steps = 100;
  double lr = 6e-4;
  double min_lr = 6e-5;
  int64_t warmup_steps = 10;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // 0 disables clipping
  int64_t seed = 1337;
  int64_t eval_every = 50;  // 0 = only at the end
  int64_t eval_batches = 8;
  int64_t checkpoint_every = 0;  // 0 = only at the end
  // train.keep_best: after every evaluation whose val loss beats all earlier ones, write the
  // model to RUN/checkpoints/best (replacing the previous best); summary.json names its step.
  bool keep_best = false;
  int64_t log_every = 1;
  // train.device: where the model, gradients, optimizer state and activations live and every op
  // runs. "cpu" (default): the CPU reference backend. "cuda": the CUDA backend on one GPU per
  // process (rank r of a node uses GPU local_rank % GPUs); a build without CUDA or a machine
  // without a visible GPU stops with one error line saying why. Checkpoints are the same files.
  std::string device = "cpu";
  // train.tf32: CUDA only. true (default): GEMMs use TF32 tensor cores (fp32 storage and
  // accumulation, 10-bit mantissa products; PyTorch's allow_tf32). false: exact fp32 GEMMs.
  bool tf32 = true;
  // train.precision: "fp32" (default) or "bf16" (mixed precision: bf16 activations and a bf16
  // copy of the weights for the GEMMs, fp32 master weights, gradients, AdamW moments and
  // statistics; see Precision in model/model.hpp). On the CPU "bf16" runs the slow reference
  // emulation of what the GPU computes.
  std::string precision = "fp32";
  // train.classifier_chunk_rows: the LM head and cross-entropy (and their backward) run over this
  // many rows of the micro-batch at a time, so only rows x vocab logits exist at once instead
  // of micro_batch * seq_len x vocab. 0 (default) = all rows at once. Results agree with 0 up
  // to float summation order.
  int64_t classifier_chunk_rows = 0;
  // train.recompute_gelu: recompute each layer's GELU output in backward instead of keeping it
  // (one shared buffer; saves (n_layer - 1) x B x T x 4 n_embd floats; results unchanged).
  bool recompute_gelu = false;
  int threads = 0;             // OpenMP threads; 0 = OMP default
  bool zero1 = false;          // shard AdamW state across data-parallel ranks
  std::string comm = "auto";   // auto | local | mpi | nccl
};

struct DataConfig {
  std::string train;
  std::string val;
  std::string calib;  // "" = val
  bool shuffle = true;
  // "none": evaluation reads data.val from its start, calibration reads data.calib (or data.val)
  // whole. "halves" (the SAF paper's protocol): the validation tokens are split at their middle
  // (data/loader.hpp: Part); calibration draws from the first half (when data.calib is empty or
  // names data.val itself; another data.calib glob is read whole) and evaluation (val PPL)
  // reads the second half only, so the reported PPL is held out from calibration.
  std::string val_split = "none";
};

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  // The `method` section as a list of method objects, applied in order (empty: ordinary
  // training). Only the shape is checked here (objects with a string "name"); every other key
  // belongs to that method, which parses and validates it (method_registry.hpp). The section
  // may be one object, a list of objects, or {"name": "none"}.
  std::vector<nlohmann::json> methods;
  nlohmann::json source;  // the merged document the run was built from

  int64_t grad_accum(int world = 1) const;  // micro-steps per update per rank
  static RunConfig from_json(const nlohmann::json& doc);  // validates everything
  // With init_model (train --init-from), the model section is init_model's with the file's
  // model keys on top (ModelConfig::merged_section; init_from names the checkpoint).
  static RunConfig load(const std::string& path, const std::vector<std::string>& overrides,
                        const ModelConfig* init_model = nullptr, const std::string& init_from = "");
  nlohmann::json to_json() const;
};

}  // namespace hw

#pragma once
// The training loop: micro-batches -> forward/backward -> all-reduce -> clip -> AdamW -> log,
// with evaluation, checkpoints, resume and the planner hook. One Trainer per run directory.
//
// Data parallelism (docs/distributed.md): every rank holds the whole model; rank r of `world`
// trains on global micro-batches next_batch + r * accum + micro, so a global batch and its loss
// do not depend on the number of ranks, and its gradient is summed in a fixed tree
// (micro_step_sum.hpp): 2 ranks give the same bits as 1 rank with twice the accumulation. With train.zero1 (and world > 1) the AdamW moments are
// sharded: each rank holds and updates the moments of only its ZeRO-1 shard of the parameter
// block, and the updated block is all-gathered. Checkpoints: rank 0 writes the model, trainer.json and (without ZeRO-1)
// optimizer.safetensors; with ZeRO-1 every rank r writes optimizer.rank{r}.safetensors.
#include <cstdint>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/data/loader.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/dist/grad_buckets.hpp"
#include "headwise/model/model.hpp"
#include "headwise/optim/adamw.hpp"
#include "headwise/train/micro_step_sum.hpp"
#include "headwise/train/planner.hpp"
#include "headwise/train/run_config.hpp"
#include "headwise/train/training_backend.hpp"

namespace hw {

using Planners = std::vector<std::unique_ptr<Planner>>;

// RUN/interventions/step_<step>.<index>.<planner>.json: one plan change of the run.
std::string intervention_file(const std::string& run_dir, int64_t step, size_t index, const std::string& planner);

struct EvalResult {
  double loss = 0.0, ppl = 0.0;
  int64_t tokens = 0;
};

// Mean loss over the first n_batches micro-batches of `loader` in order (shuffle off), split
// across ranks and summed with `comm`.
EvalResult evaluate(Model<float>& model, const data::TokenLoader& loader, int64_t n_batches, int64_t B, int64_t T,
                    dist::Comm& comm);

struct TrainerState {
  int64_t step = 0;        // updates completed
  int64_t next_batch = 0;  // global micro-batch index of the next update's first micro-batch
  int64_t tokens = 0;      // tokens trained on
  // train.keep_best: the best val loss so far and the step of RUN/checkpoints/best (-1: none yet).
  double best_val_loss = 0.0;
  int64_t best_step = -1;
  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& j, const std::string& path);
};

class Trainer {
 public:
  // out_dir may be empty (no files written: benchmarks and tests). With synthetic_data the
  // batches are uniform random tokens drawn from train.seed (benchmarks: no data loading).
  // The model computes on the backend of train.device (GPU comm.local_rank() % GPUs for
  // "cuda"), or on `backend` when given (tests; it must outlive the trainer).
  // `planners` act in order at the top of each update (method_registry.hpp builds them from the
  // config's method list); the run records their configurations as its method section.
  Trainer(const RunConfig& cfg, std::string out_dir, dist::Comm& comm, Planners planners,
          bool synthetic_data = false, const Backend<float>* backend = nullptr);
  // One planner, or none.
  Trainer(const RunConfig& cfg, std::string out_dir, dist::Comm& comm, std::unique_ptr<Planner> planner = nullptr,
          bool synthetic_data = false, const Backend<float>* backend = nullptr);
  ~Trainer();

  // Weights only, fresh optimizer; with `plan`, that head plan is installed on them (train
  // --init-from with the run config's model.head_plan).
  void init_from(const std::string& checkpoint_dir, const attn::HeadPlan* plan = nullptr);
  // Weights, optimizer, position, plan. With a run folder, its record (metrics.jsonl, the
  // interventions) is cut back to the checkpoint's step (run_folder.hpp).
  void resume(const std::string& checkpoint_dir);

  // Train until `stop_step` updates are done (default: train.steps). Writes metrics.jsonl,
  // periodic checkpoints, a final checkpoint and summary.json (when stop_step == train.steps).
  // Planners acting at train.steps act right after the last update, before the final
  // evaluation and checkpoint (only when this call makes that update). After a stop signal
  // (stop_signals.hpp, when installed) it returns between updates with a checkpoint of the last
  // one; the summary then says "interrupted" (the signal) and "checkpoint" (its folder, empty
  // when no update was made).
  nlohmann::json run(int64_t stop_step = -1);
  // One optimizer update on the next global batch; returns the mean loss. update_ms gets the
  // time of the update itself (accumulation, backward, all-reduce, clip, AdamW), without data
  // loading.
  double train_step(double* grad_norm = nullptr, double* update_ms = nullptr);
  EvalResult eval(int64_t n_batches = -1);
  void save_checkpoint(const std::string& dir);
  // The planner hook: every planner that acts at the current step (in order) looks at the
  // model and may change the plan, which is installed in place and logged as
  // RUN/interventions/step_<N>.<index>.<planner>.json. Returns the reports of the changes made
  // (empty when none). run() calls it at the top of every update; experiments call it directly.
  std::vector<nlohmann::json> intervene_if_due();
  // Apply a plan change in place, as the planner hook does. A change that keeps the parameter
  // layout (Model::keeps_layout: window or sink sizes, softmax <-> window) touches neither the
  // parameter, gradient nor AdamW arenas and returns true; one that moves it remaps weights and
  // AdamW moments exactly (ZeRO-1 shards included) and returns false.
  bool install(const PlanChange& change);

  Model<float>& model() { return *model_; }
  const Backend<float>& ops() const { return *ops_; }
  AdamW& optimizer() { return *opt_; }
  const TrainerState& state() const { return state_; }
  // The run's configuration now: the model section carries the live head plan (held by the
  // model alone) and the method section the planners' own configurations.
  RunConfig config() const;
  const Planners& planners() const { return planners_; }
  dist::Comm& comm() { return comm_; }

 private:
  // A model of `mc` on the run's backend with the run's classifier chunking.
  std::unique_ptr<Model<float>> make_model(const ModelConfig& mc, const HeadExtras& extras = {}) const;
  // Whatever depends on where the gradient block is, rebuilt whenever it moves (new model,
  // layout-moving plan change): the micro-step partial sums, and for plain data parallelism the
  // gradient all-reduce in per-layer buckets, started from backward's grad-ready hook on the
  // last micro-step.
  void make_buckets();
  void find_tokenizer();  // sets tokenizer_json_, checks model.vocab_size against it
  void log_step(double loss, double grad_norm, double lr, double ms, double update_ms);
  void append_metrics(const nlohmann::json& line);
  void fetch_train(int64_t index);
  // Sum the ranks' gradients and return the global gradient norm (ZeRO-1: only the own shard
  // of the gradient block holds the sum afterwards).
  double reduce_gradients();
  // Clip with the global norm, AdamW (ZeRO-1: on the own shard, then all-gather the block).
  void apply_update(double norm, double lr);
  // The ZeRO-1 shard of the current parameter block, in floats.
  dist::Range own_shard() const;
  // AdamW for the current parameters: sharded on own_shard() under ZeRO-1, full otherwise.
  void make_optimizer();
  // ZeRO-1: the full moments (a temporary arena laid out like the parameter block) from every
  // rank's shard; collective.
  std::unique_ptr<Arena> gather_moments(Arena& shard, const std::string& role);
  // ZeRO-1: copy own_shard() of full moments laid out like the parameter block into `shard`.
  void keep_own_shard(const Arena& full, Arena& shard);
  // Rank 0 logs the AdamW bytes per rank (ZeRO-1: its own, the largest, the shards' cover).
  // Collective under ZeRO-1.
  void log_optimizer_memory();
  // The stop signal every rank agrees on (0: none); collective when the handlers are installed.
  int agreed_stop_signal();
  void save_optimizer_shard(const std::string& path);
  void load_optimizer_shard(const std::string& path);
  // The planners' states for trainer.json, and their restoration on resume.
  nlohmann::json planner_states() const;
  void restore_planners(const nlohmann::json& trainer_json, const std::string& path);

  RunConfig cfg_;  // as configured; the live head plan is model_'s (config() combines them)
  std::string out_dir_;
  // The data's tokenizer.json (next to the first train shard, written by `prepare --tokenizer`),
  // copied into every checkpoint; empty when the data has none (bytes).
  std::string tokenizer_json_;
  dist::Comm& comm_;
  std::unique_ptr<TrainingBackend> backend_;  // train.device's backend (absent when one was given)
  const Backend<float>* ops_ = nullptr;       // what the model and AdamW compute on
  Planners planners_;
  std::unique_ptr<Model<float>> model_;
  std::unique_ptr<AdamW> opt_;
  std::unique_ptr<data::TokenLoader> train_loader_, val_loader_;
  std::unique_ptr<MicroStepSum> micro_sum_;     // the update's micro-step gradients, summed in a tree
  std::unique_ptr<dist::GradBuckets> buckets_;  // absent: one blocking all-reduce of the block
  bool reduce_in_backward_ = false;             // the hook feeds buckets_ (last micro-step only)
  TrainerState state_;
  bool synthetic_ = false;
  bool zero1_ = false;  // train.zero1 with more than one rank: AdamW holds only own_shard()
  int64_t accum_ = 1;
  std::vector<int32_t> inputs_, targets_;
  int64_t resumed_step_ = -1;  // the step of the run's own checkpoint resume() read (-1: none)
  double update_ms_sum_ = 0.0;
  int64_t update_ms_count_ = 0;
};

}  // namespace hw

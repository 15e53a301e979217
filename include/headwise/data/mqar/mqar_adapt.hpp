#pragma once
// MQAR adaptation and evaluation (the paper's associative-recall comparison, Appendix C.3.6):
// take a model (a checkpoint, possibly with SAF's static heads already in it, or a fresh one),
// optionally apply a method (SAF, a pruning control, ...) calibrated on MQAR sequences, adapt it on MQAR with
// the loss on query positions only (AdamW, constant learning rate after an optional linear warm-up; static patterns stay fixed:
// alpha/rho are buffers), then measure query accuracy for several numbers of key-value pairs at
// a fixed length. Defaults follow methods.md; every size can be shrunk for a CPU run.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "headwise/data/mqar.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/model/model.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

struct MqarOptions {
  int64_t seq_len = data::kMqarSeqLen;  // 512
  int vocab = data::kMqarVocab;         // 8192: keys [1, 4096), values [4096, 8192)
  int train_pairs = 8;
  int64_t steps = 1500;
  int64_t batch = 16;
  double lr = 1e-4;  // constant after the warm-up
  // Linear warm-up from lr / N over the first N updates. The paper's adaptation of a trained
  // model has none (0); a model trained from scratch on MQAR needs one (and
  // model.init_residual_scale = false): without either it stays on the plateau where it names
  // one of the context's values but not the one bound to the key (25% at 4 pairs after 2,500
  // updates, in headwise and in PyTorch alike; with both, 96.7% after 1,500).
  int64_t warmup_steps = 0;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double grad_clip = 1.0;
  std::vector<int> eval_pairs = {8, 16, 24, 32, 48, 64};
  int64_t eval_examples = 512;  // per pair count
  int64_t eval_batch = 16;
  uint64_t seed = 1234;  // training examples; evaluation and calibration use derived streams
  int64_t log_every = 100;
  void validate(const ModelConfig& model) const;  // throws hw::Error naming the option
};

// Loss targets of an MQAR batch: the value at query positions, -1 (ignored) elsewhere.
std::vector<int32_t> mqar_loss_targets(const data::MqarBatch& batch);

// Any registered method, calibrated on MQAR sequences of train_pairs pairs, installed into
// the model: `method` is one method object ({"name": ..., its keys}) built into a planner
// through the method registry for a one-update run, with "at_step": 0 unless it sets its own
// schedule; the planner acts once with the MQAR sequences as its calibration data. Returns the
// change (its report is what the interventions log holds in training runs), or nothing when the
// method looked and kept the plan. An unknown method or key is the registry's error; a method
// that does not act at step 0 is an error naming `what`.
std::optional<PlanChange> apply_method_on_mqar(Model<float>& model, nlohmann::json method, const MqarOptions& opt,
                                               dist::Comm& comm, const std::string& what = "mqar --method");

// Adaptation: opt.steps AdamW updates on fresh MQAR batches. Returns per-update losses; writes
// one JSON line per update to metrics_path when it is not empty.
std::vector<double> adapt_mqar(Model<float>& model, const MqarOptions& opt, const std::string& metrics_path = "");

struct MqarAccuracy {
  int pairs = 0;
  int64_t correct = 0, total = 0;
  double accuracy() const { return total > 0 ? double(correct) / double(total) : 0.0; }
};
// Evaluation examples [start, start + n) of `pairs` pairs (a stream that depends only on
// opt.seed and pairs, separate from the adaptation examples).
data::MqarBatch mqar_eval_examples(const MqarOptions& opt, int pairs, int64_t start, int64_t n);
// Query accuracy (argmax over the model's whole vocabulary) per pair count, on examples that
// depend only on (opt.seed, pairs): every model is scored on the same examples.
std::vector<MqarAccuracy> evaluate_mqar(Model<float>& model, const MqarOptions& opt);

std::string mqar_table_markdown(const std::vector<MqarAccuracy>& acc, const std::string& label);

}  // namespace hw

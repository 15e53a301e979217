#pragma once
// Fine-tuning on a multiple-choice task file (SAF's SST-2 / BoolQ / QuALITY rows): each example
// becomes one sequence, its prompt followed by its correct choice, tokenized exactly as
// eval-tasks scores it (encode_pair: the harness's context and continuation tokens, truncated
// from the left to the context), with the loss on the answer tokens only: every other target is
// -1 (kIgnoreTarget), the mechanism MQAR adaptation uses. AdamW, warm-up then cosine, global
// clipping; examples are shuffled each epoch from the seed, so a run is deterministic.
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/eval/eval_tokenizer.hpp"
#include "headwise/eval/task_file.hpp"
#include "headwise/model/model.hpp"

namespace hw::eval {

struct FinetuneOptions {
  int64_t steps = 200, batch = 8, context = 0;  // context 0: the model's block size
  double lr = 1e-4, min_lr = 1e-5, weight_decay = 0.0, grad_clip = 1.0;
  int64_t warmup_steps = 10, log_every = 20;
  uint64_t seed = 1337;
};

// One training sequence: inputs (right-padded with 0) and targets (-1 except at answer tokens).
struct AnswerSequence {
  std::vector<int32_t> inputs, targets;
};
// The sequence of one example's correct choice, length `T` (the request's input: context +
// answer less its last token, at most T tokens, from the left as the scorer truncates).
AnswerSequence answer_sequence(const McExample& ex, const EvalTokenizer& tok, int64_t T);

// opt.steps updates on `task`; returns the loss (mean over answer tokens) of each update and
// appends {"step", "loss", "lr", "grad_norm"} lines to metrics_path when it is not empty.
std::vector<double> finetune_on_task(Model<float>& model, const TaskFile& task, const EvalTokenizer& tok,
                                     const FinetuneOptions& opt, const std::string& metrics_path = "");

}  // namespace hw::eval

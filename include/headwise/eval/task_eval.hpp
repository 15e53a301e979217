#pragma once
// Zero-shot multiple-choice evaluation of one task file (`headwise eval-tasks`): requests built and
// tokenized as the harness does (task_file.hpp, eval_tokenizer.hpp), scored together (every
// choice of every example in one pass of batched forwards, rows shared where inputs coincide:
// loglikelihood.hpp), judged (mc_metrics.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/eval/eval_tokenizer.hpp"
#include "headwise/eval/loglikelihood.hpp"
#include "headwise/eval/mc_metrics.hpp"
#include "headwise/eval/task_file.hpp"

namespace hw::eval {

struct ExampleScore {
  int64_t line = 0;
  std::vector<double> lls;
  std::vector<bool> greedy;
  int label = 0;
  McJudgement judgement;
};

struct TaskResult {
  std::string path, format;
  MeanStderr acc, acc_norm;
  double seconds = 0.0;  // tokenizing and scoring
  ScoreStats stats;
  std::vector<ExampleScore> examples;
  double examples_per_s() const { return seconds > 0 ? double(examples.size()) / seconds : 0.0; }
  nlohmann::json summary_json() const;               // the metrics and counts, no per-example rows
  std::vector<nlohmann::json> example_json() const;  // one object per example (--samples)
};

// Tokenizing errors name the file and line. show_progress: a progress line on stderr (examples
// done, examples/s, ETA; rewritten in place on a terminal, else a line every 10 s).
TaskResult evaluate_task(const TaskFile& task, const EvalTokenizer& tok, LoglikelihoodScorer& scorer,
                         bool show_progress = false);

}  // namespace hw::eval

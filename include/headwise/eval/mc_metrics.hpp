#pragma once
// Multiple-choice metrics as lm-evaluation-harness computes them (lm_eval/api/task.py
// process_results for output_type multiple_choice, lm_eval/api/metrics.py):
//   pred      = argmax_i ll_i                      (numpy argmax: the first maximum)
//   pred_norm = argmax_i ll_i / len(choice_i)      (length in characters, Python len)
//   acc = [pred == label], acc_norm = [pred_norm == label], each averaged over examples;
//   stderr = mean_stderr = sample standard deviation (n - 1) / sqrt(n) of the per-example values.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hw::eval {

struct McJudgement {
  int pred = 0, pred_norm = 0;
  bool acc = false, acc_norm = false;
};
McJudgement judge(const std::vector<double>& lls, const std::vector<std::string>& choices, int label);

struct MeanStderr {
  double mean = 0.0;
  std::optional<double> stderr_;  // absent for fewer than 2 values (the harness prints N/A)
};
MeanStderr mean_stderr(const std::vector<double>& values);

}  // namespace hw::eval

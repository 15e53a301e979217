// acc, acc_norm and their standard errors (mc_metrics.hpp).
#include "headwise/eval/mc_metrics.hpp"

#include <cmath>

#include "headwise/core/error.hpp"
#include "headwise/eval/py_text.hpp"

namespace hw::eval {

McJudgement judge(const std::vector<double>& lls, const std::vector<std::string>& choices, int label) {
  check(!lls.empty() && lls.size() == choices.size(), "judge: one log-likelihood per choice");
  McJudgement j;
  double best = lls[0], best_norm = lls[0] / double(py_len(choices[0]));
  for (size_t i = 1; i < lls.size(); ++i) {
    if (lls[i] > best) best = lls[i], j.pred = int(i);
    const double norm = lls[i] / double(py_len(choices[i]));
    if (norm > best_norm) best_norm = norm, j.pred_norm = int(i);
  }
  j.acc = j.pred == label;
  j.acc_norm = j.pred_norm == label;
  return j;
}

MeanStderr mean_stderr(const std::vector<double>& values) {
  MeanStderr m;
  const double n = double(values.size());
  if (values.empty()) return m;
  for (double v : values) m.mean += v;
  m.mean /= n;
  if (values.size() >= 2) {
    double ss = 0.0;
    for (double v : values) ss += (v - m.mean) * (v - m.mean);
    m.stderr_ = std::sqrt(ss / (n - 1.0)) / std::sqrt(n);
  }
  return m;
}

}  // namespace hw::eval

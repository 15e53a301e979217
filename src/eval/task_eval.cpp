// One task file, end to end (task_eval.hpp).
#include "headwise/eval/task_eval.hpp"

#include "eval/progress_line.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"

namespace hw::eval {

TaskResult evaluate_task(const TaskFile& task, const EvalTokenizer& tok, LoglikelihoodScorer& scorer,
                         bool show_progress) {
  const Stopwatch timer;
  TaskResult res;
  res.path = task.path;
  res.format = task.format;
  std::vector<LlRequest> requests;
  std::vector<size_t> first;  // first request of each example
  for (const McExample& ex : task.examples) {
    const std::string where = task.path + ":" + std::to_string(ex.line);
    first.push_back(requests.size());
    for (size_t c = 0; c < ex.continuations.size(); ++c) {
      LlRequest r;
      try {
        r = encode_pair(tok, ex.contexts[c], ex.continuations[c]);
      } catch (const Error& e) {
        fail(where + ": choice " + std::to_string(c) + ": " + e.what());
      }
      check(!r.context.empty(), where + ": choice " + std::to_string(c) + ": the context is only whitespace");
      check(!r.continuation.empty(), where + ": choice " + std::to_string(c) + " adds no tokens after its context");
      check(int64_t(r.continuation.size()) <= scorer.max_length(),
            where + ": choice " + std::to_string(c) + " has " + std::to_string(r.continuation.size()) +
                " tokens, more than the model's context of " + std::to_string(scorer.max_length()));
      requests.push_back(std::move(r));
    }
  }
  ProgressLine progress(show_progress, "eval-tasks " + task.path, "examples", int64_t(task.examples.size()));
  const ScoreStats before = scorer.stats();
  const std::vector<LlResult> lls =
      scorer.score(requests, [&](int64_t done, int64_t total) { progress.update(done, total); });
  res.stats = scorer.stats();
  res.stats.requests -= before.requests;
  res.stats.rows -= before.rows;
  res.stats.forwards -= before.forwards;
  res.stats.tokens -= before.tokens;
  std::vector<double> acc, acc_norm;
  for (size_t e = 0; e < task.examples.size(); ++e) {
    const McExample& ex = task.examples[e];
    ExampleScore s;
    s.line = ex.line;
    s.label = ex.label;
    for (size_t c = 0; c < ex.continuations.size(); ++c) {
      s.lls.push_back(lls[first[e] + c].ll);
      s.greedy.push_back(lls[first[e] + c].greedy);
    }
    s.judgement = judge(s.lls, ex.choices, ex.label);
    acc.push_back(s.judgement.acc ? 1.0 : 0.0);
    acc_norm.push_back(s.judgement.acc_norm ? 1.0 : 0.0);
    res.examples.push_back(std::move(s));
  }
  res.acc = mean_stderr(acc);
  res.acc_norm = mean_stderr(acc_norm);
  res.seconds = timer.seconds();
  return res;
}

nlohmann::json TaskResult::summary_json() const {
  auto se = [](const MeanStderr& m) { return m.stderr_ ? nlohmann::json(*m.stderr_) : nlohmann::json(nullptr); };
  return {{"task", path},
          {"format", format},
          {"examples", examples.size()},
          {"acc", acc.mean},
          {"acc_stderr", se(acc)},
          {"acc_norm", acc_norm.mean},
          {"acc_norm_stderr", se(acc_norm)},
          {"seconds", seconds},
          {"examples_per_s", examples_per_s()},
          {"requests", stats.requests},
          {"rows", stats.rows},
          {"forwards", stats.forwards},
          {"tokens", stats.tokens}};
}

std::vector<nlohmann::json> TaskResult::example_json() const {
  std::vector<nlohmann::json> out;
  for (const ExampleScore& s : examples)
    out.push_back({{"task", path},
                   {"line", s.line},
                   {"lls", s.lls},
                   {"greedy", s.greedy},
                   {"label", s.label},
                   {"pred", s.judgement.pred},
                   {"pred_norm", s.judgement.pred_norm},
                   {"acc", s.judgement.acc},
                   {"acc_norm", s.judgement.acc_norm}});
  return out;
}

}  // namespace hw::eval

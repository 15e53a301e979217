#pragma once
// Log-likelihood of continuations given contexts on a model, the way lm-evaluation-harness's HF
// model computes it (lm_eval/models/huggingface.py _loglikelihood_tokens, causal branch):
// the input is (context + continuation)[-(max_length + 1):][:-1] (truncated from the left when
// too long), the continuation's log-probabilities are read at the input's last
// len(continuation) positions from log_softmax over the model's whole vocabulary, summed, and
// `greedy` says whether every continuation token is the argmax there.
//
// Rows are shared: a request whose input is a prefix of another's (one-token continuations of
// one context, as MMLU's " A" / " B", have equal inputs; the harness's logits cache shares
// those) reads its positions from the longer row, since every head kind is causal. Rows run
// right-padded in batches (a causal model's real positions do not see the padding), longest
// first. Works through Model::forward / read_logits, so any head plan and model family the
// model supports.
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/eval/eval_tokenizer.hpp"
#include "headwise/model/model.hpp"

namespace hw::eval {

struct LlResult {
  double ll = 0.0;     // sum of log P(token) over the continuation
  bool greedy = false; // every continuation token is the first argmax of its logits
};

struct ScoreStats {
  int64_t requests = 0, rows = 0, forwards = 0, tokens = 0;  // tokens: real (unpadded) input tokens run
};

class LoglikelihoodScorer {
 public:
  // max_length: the harness's max_length (<= the model's block_size); batch_rows: rows per forward
  // (fewer when batch x length x vocab logits would pass logits_budget_bytes; at least 1).
  LoglikelihoodScorer(Model<float>& model, int64_t max_length, int64_t batch_rows,
                      size_t logits_budget_bytes = size_t(1) << 30);

  // progress(done, total) after each forward (requests whose rows are all done).
  std::vector<LlResult> score(const std::vector<LlRequest>& requests,
                              const std::function<void(int64_t, int64_t)>& progress = {});
  const ScoreStats& stats() const { return stats_; }
  int64_t max_length() const { return max_length_; }

 private:
  Model<float>& model_;
  int64_t max_length_, batch_rows_;
  size_t budget_;
  ScoreStats stats_;
  std::vector<float> logits_;
};

}  // namespace hw::eval

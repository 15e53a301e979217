#pragma once
// Perplexity of text documents with the rolling windows of lm-evaluation-harness's
// loglikelihood_rolling (lm_eval/utils.py get_rolling_token_windows + make_disjoint_window,
// lm_eval/models/huggingface.py loglikelihood_rolling) and the `wikitext` task's metrics
// (lm_eval/tasks/wikitext/preprocess_wikitext.py process_results, lm_eval/api/metrics.py
// weighted_perplexity / bits_per_byte):
//   every token is scored once; the first window scores the first min(N, n) tokens after the
//   prefix token; each next window scores up to S = stride further tokens given the N - S or more
//   (the last window) tokens before them, i.e. the harness's windows with max_seq_len = N and
//   context_len = N - S + 1. The harness itself runs stride = N (context_len 1): non-overlapping
//   windows of N, the last one carrying as much context as fits.
//   word_perplexity = exp(-sum ll / sum words), words = len(re.split(r"\s+", doc));
//   byte_perplexity = exp(-sum ll / sum bytes), bytes = len(doc.encode("utf-8"));
//   bits_per_byte = -sum ll / sum bytes / ln 2; token_perplexity = exp(-sum ll / sum tokens).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/eval/eval_tokenizer.hpp"
#include "headwise/eval/loglikelihood.hpp"

namespace hw::eval {

// The windows of one document's tokens as (context, continuation) requests whose input the scorer
// rebuilds exactly (context + continuation = the window's tokens plus the next one).
std::vector<LlRequest> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token, int64_t max_seq_len,
                                       int64_t context_len);

struct TextPerplexity {
  double ll = 0.0;
  int64_t documents = 0, tokens = 0, words = 0, bytes = 0, windows = 0;
  double seconds = 0.0;
  double token_perplexity() const;
  double word_perplexity() const;
  double byte_perplexity() const;
  double bits_per_byte() const;
  nlohmann::json to_json() const;
};

// Each document is scored on its own (its first window starts at the prefix token); totals are
// summed as the harness's weighted means do. context: N; stride: S (1 <= S <= N). show_progress:
// a progress line on stderr (windows done, windows/s, ETA).
TextPerplexity text_perplexity(const std::vector<std::string>& documents, const EvalTokenizer& tok,
                               LoglikelihoodScorer& scorer, int64_t context, int64_t stride,
                               bool show_progress = false);

}  // namespace hw::eval

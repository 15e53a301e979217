// Rolling-window text perplexity (text_perplexity.hpp).
#include "headwise/eval/text_perplexity.hpp"

#include <cmath>

#include "eval/progress_line.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/eval/py_text.hpp"

namespace hw::eval {

std::vector<LlRequest> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token, int64_t max_seq_len,
                                       int64_t context_len) {
  check(context_len >= 1 && context_len <= max_seq_len, "rolling windows need 1 <= context_len <= max_seq_len");
  std::vector<LlRequest> out;
  const int64_t n = int64_t(tokens.size());
  if (n == 0) return out;
  auto at = [&](int64_t a, int64_t b) {  // tokens[a:b]
    return std::vector<int32_t>(tokens.begin() + a, tokens.begin() + b);
  };
  const int64_t pred_len = max_seq_len - context_len + 1;
  const int64_t first = std::min(max_seq_len, n);
  // First window: input [prefix] + tokens[:first - 1], predicting tokens[:first]; as a disjoint
  // pair the context is the prefix token alone.
  out.push_back(LlRequest{{prefix_token}, at(0, first)});
  int64_t predicted = first;
  while (predicted < n) {
    const int64_t p = std::min(n - predicted, pred_len);
    const int64_t end = predicted + p;
    // Input tokens[end - max_seq_len - 1 : end - 1], predicting tokens[end - p : end]; made
    // disjoint: the context is the input less its last p - 1 tokens.
    out.push_back(LlRequest{at(end - max_seq_len - 1, end - p), at(end - p, end)});
    predicted += p;
  }
  return out;
}

double TextPerplexity::token_perplexity() const { return std::exp(-ll / double(tokens)); }
double TextPerplexity::word_perplexity() const { return std::exp(-ll / double(words)); }
double TextPerplexity::byte_perplexity() const { return std::exp(-ll / double(bytes)); }
double TextPerplexity::bits_per_byte() const { return -ll / double(bytes) / std::log(2.0); }

nlohmann::json TextPerplexity::to_json() const {
  return {{"token_perplexity", token_perplexity()},
          {"word_perplexity", word_perplexity()},
          {"byte_perplexity", byte_perplexity()},
          {"bits_per_byte", bits_per_byte()},
          {"loglikelihood", ll},
          {"documents", documents},
          {"tokens", tokens},
          {"words", words},
          {"bytes", bytes},
          {"windows", windows},
          {"seconds", seconds}};
}

TextPerplexity text_perplexity(const std::vector<std::string>& documents, const EvalTokenizer& tok,
                               LoglikelihoodScorer& scorer, int64_t context, int64_t stride, bool show_progress) {
  check(context >= 1 && context <= scorer.max_length(),
        "--context " + std::to_string(context) + " is outside 1.." + std::to_string(scorer.max_length()));
  check(stride >= 1 && stride <= context,
        "--stride " + std::to_string(stride) + " is outside 1..--context (" + std::to_string(context) + ")");
  const Stopwatch timer;
  TextPerplexity r;
  std::vector<LlRequest> requests;
  const int32_t prefix = tok.prefix_token();
  for (const std::string& doc : documents) {
    const std::vector<int32_t> ids = tok.encode(doc);
    std::vector<LlRequest> w = rolling_windows(ids, prefix, context, context - stride + 1);
    requests.insert(requests.end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
    r.documents += 1;
    r.tokens += int64_t(ids.size());
    r.words += py_split_whitespace_count(doc);
    r.bytes += int64_t(doc.size());
  }
  ProgressLine progress(show_progress, "eval --text", "windows", int64_t(requests.size()));
  for (const LlResult& x : scorer.score(requests, [&](int64_t done, int64_t all) { progress.update(done, all); }))
    r.ll += x.ll;
  r.windows = int64_t(requests.size());
  r.seconds = timer.seconds();
  return r;
}

}  // namespace hw::eval

// Batched, row-sharing log-likelihood scoring (loglikelihood.hpp).
#include "headwise/eval/loglikelihood.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headwise/core/error.hpp"

namespace hw::eval {

namespace {

struct Row {
  std::vector<int32_t> input;
  std::vector<size_t> requests;  // requests read from this row
};

// The harness's model input for a request (its continuation's positions are the last ones).
std::vector<int32_t> model_input(const LlRequest& r, int64_t max_length) {
  std::vector<int32_t> full = r.context;
  full.insert(full.end(), r.continuation.begin(), r.continuation.end());
  const size_t keep = std::min(full.size(), size_t(max_length + 1));
  return std::vector<int32_t>(full.end() - std::ptrdiff_t(keep), full.end() - 1);
}

}  // namespace

LoglikelihoodScorer::LoglikelihoodScorer(Model<float>& model, int64_t max_length, int64_t batch_rows,
                                         size_t logits_budget_bytes)
    : model_(model), max_length_(max_length), batch_rows_(batch_rows), budget_(logits_budget_bytes) {
  check(max_length >= 1 && max_length <= model.config().block_size,
        "the scoring context " + std::to_string(max_length) + " is outside 1.." +
            std::to_string(model.config().block_size) + " (the model's block size)");
  check(batch_rows >= 1, "the batch must hold at least one row");
}

std::vector<LlResult> LoglikelihoodScorer::score(const std::vector<LlRequest>& requests,
                                                 const std::function<void(int64_t, int64_t)>& progress) {
  const size_t n_req = requests.size();
  std::vector<std::vector<int32_t>> inputs(n_req);
  for (size_t i = 0; i < n_req; ++i) {
    const LlRequest& r = requests[i];
    check(!r.context.empty(), "a request has an empty context (the harness needs at least one context token)");
    check(!r.continuation.empty(), "a choice adds no tokens after its context");
    check(int64_t(r.continuation.size()) <= max_length_,
          "a continuation of " + std::to_string(r.continuation.size()) + " tokens is longer than the context of " +
              std::to_string(max_length_));
    for (int32_t t : r.context) check(t >= 0 && t < model_.config().vocab_size, "a token id is outside the vocabulary");
    for (int32_t t : r.continuation) check(t >= 0 && t < model_.config().vocab_size, "a token id is outside the vocabulary");
    inputs[i] = model_input(r, max_length_);
  }
  // Rows: in lexicographic order a prefix comes right before the inputs that extend it (all inputs
  // between it and an extension share it), so walking backwards maps each input to the row of its
  // successor when it is a prefix of that input.
  std::vector<size_t> order(n_req);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return inputs[a] < inputs[b]; });
  std::vector<Row> rows;
  std::vector<size_t> row_of(n_req);
  for (size_t k = n_req; k-- > 0;) {
    const size_t i = order[k];
    const bool shares = !rows.empty() && inputs[i].size() <= rows.back().input.size() &&
                        std::equal(inputs[i].begin(), inputs[i].end(), rows.back().input.begin());
    if (!shares) rows.push_back(Row{inputs[i], {}});
    rows.back().requests.push_back(i);
    row_of[i] = rows.size() - 1;
  }
  // Longest rows first (as the harness's collator): batches pad little, and an out-of-memory shows
  // at once.
  std::vector<size_t> by_len(rows.size());
  std::iota(by_len.begin(), by_len.end(), size_t(0));
  std::stable_sort(by_len.begin(), by_len.end(),
                   [&](size_t a, size_t b) { return rows[a].input.size() > rows[b].input.size(); });

  const int64_t V = model_.config().vocab_size;
  std::vector<LlResult> out(n_req);
  std::vector<int32_t> x;
  int64_t done = 0;
  stats_.requests += int64_t(n_req);
  stats_.rows += int64_t(rows.size());
  for (size_t b0 = 0; b0 < by_len.size();) {
    const int64_t T = int64_t(rows[by_len[b0]].input.size());
    const size_t row_bytes = size_t(T) * size_t(V) * sizeof(float) * 2;  // the model's logits and our copy
    const int64_t fit = std::max<int64_t>(1, int64_t(budget_ / std::max<size_t>(row_bytes, 1)));
    const int64_t B = std::min<int64_t>({batch_rows_, fit, int64_t(by_len.size() - b0)});
    x.assign(size_t(B * T), 0);  // right padding: token 0, never read back
    for (int64_t r = 0; r < B; ++r) {
      const Row& row = rows[by_len[b0 + size_t(r)]];
      std::copy(row.input.begin(), row.input.end(), x.begin() + r * T);
      stats_.tokens += int64_t(row.input.size());
    }
    model_.forward(x.data(), nullptr, B, T);
    model_.read_logits(logits_);
    ++stats_.forwards;
    std::vector<size_t> batch_requests;
    for (int64_t r = 0; r < B; ++r)
      for (size_t i : rows[by_len[b0 + size_t(r)]].requests) batch_requests.push_back(i);
    std::vector<int64_t> row_in_batch(rows.size(), -1);
    for (int64_t r = 0; r < B; ++r) row_in_batch[by_len[b0 + size_t(r)]] = r;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t q = 0; q < batch_requests.size(); ++q) {
      const size_t i = batch_requests[q];
      const std::vector<int32_t>& cont = requests[i].continuation;
      const int64_t n = int64_t(cont.size());
      const int64_t start = int64_t(inputs[i].size()) - n;  // first scored position
      const int64_t r = row_in_batch[row_of[i]];
      double ll = 0.0;
      bool greedy = true;
      for (int64_t k = 0; k < n; ++k) {
        const float* z = logits_.data() + (r * T + start + k) * V;
        int64_t arg = 0;
        for (int64_t v = 1; v < V; ++v)
          if (z[v] > z[arg]) arg = v;
        double sum = 0.0;
        const double zmax = z[arg];
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - zmax);
        ll += double(z[cont[size_t(k)]]) - zmax - std::log(sum);
        greedy = greedy && arg == cont[size_t(k)];
      }
      out[i] = LlResult{ll, greedy};
    }
    done += int64_t(batch_requests.size());
    b0 += size_t(B);
    if (progress) progress(done, int64_t(n_req));
  }
  return out;
}

}  // namespace hw::eval

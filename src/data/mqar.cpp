#include "headwise/data/mqar.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::data {

namespace {

// k distinct integers from [lo, hi), uniform without replacement. k is tiny next to the range
// (at most 64 of 4095), so rejection is cheaper than shuffling the whole range.
void draw_distinct(Rng& rng, int lo, int hi, int k, int32_t* out) {
  const auto span = static_cast<uint64_t>(hi - lo);
  for (int i = 0; i < k; ++i) {
    for (;;) {
      const auto v = static_cast<int32_t>(lo + static_cast<int>(rng.below(span)));
      bool seen = false;
      for (int j = 0; j < i && !seen; ++j) seen = out[j] == v;
      if (!seen) {
        out[i] = v;
        break;
      }
    }
  }
}

// Sequential weighted draws without replacement (each draw renormalises over what is left).
void draw_gaps(Rng& rng, const std::vector<double>& weight, int k, std::vector<uint8_t>& used, int32_t* out) {
  std::fill(used.begin(), used.end(), 0);
  for (int i = 0; i < k; ++i) {
    double left = 0.0;
    for (size_t g = 0; g < weight.size(); ++g)
      if (!used[g]) left += weight[g];
    const double u = rng.uniform() * left;
    double acc = 0.0;
    size_t pick = weight.size();
    for (size_t g = 0; g < weight.size(); ++g) {
      if (used[g]) continue;
      pick = g;  // falls back to the last free slot if rounding leaves u >= acc
      acc += weight[g];
      if (u < acc) break;
    }
    used[pick] = 1;
    out[i] = static_cast<int32_t>(pick);
  }
}

}  // namespace

MqarBatch generate_mqar(int64_t n_examples, int64_t seq_len, int n_pairs, int vocab, uint64_t seed,
                        int64_t first_example_index) {
  const std::string what = "MQAR (length " + std::to_string(seq_len) + ", " + std::to_string(n_pairs) +
                           " pairs, vocabulary " + std::to_string(vocab) + ")";
  check(n_examples >= 0 && first_example_index >= 0, what + ": negative example count or index");
  check(seq_len > 0 && seq_len % 2 == 0, what + ": length must be positive and even");
  check(n_pairs >= 1 && 4 * static_cast<int64_t>(n_pairs) <= seq_len, what + ": needs 1 <= pairs <= length / 4");
  check(vocab >= 4 && vocab / 2 - 1 >= n_pairs && vocab - vocab / 2 >= n_pairs,
        what + ": vocabulary too small for distinct keys and values");

  const int key_end = vocab / 2;  // keys [1, key_end), values [key_end, vocab)
  const int64_t ctx = 2 * static_cast<int64_t>(n_pairs);
  const auto slots = static_cast<size_t>((seq_len - ctx) / 2);
  std::vector<double> weight(slots);
  for (size_t g = 0; g < slots; ++g) weight[g] = std::pow(static_cast<double>(g + 1), kMqarPowerA - 1.0);

  MqarBatch b;
  b.n_examples = n_examples;
  b.seq_len = seq_len;
  const auto total = static_cast<size_t>(n_examples * seq_len);
  b.inputs.assign(total, 0);
  b.targets.assign(total, 0);
  b.query_mask.assign(total, 0);
  std::vector<int32_t> keys(static_cast<size_t>(n_pairs)), values(keys.size()), gaps(keys.size());
  std::vector<uint8_t> used(slots);
  for (int64_t e = 0; e < n_examples; ++e) {
    Rng rng(derive_seed(seed, Stream::Mqar, static_cast<uint64_t>(first_example_index + e)));
    draw_distinct(rng, 1, key_end, n_pairs, keys.data());
    draw_distinct(rng, key_end, vocab, n_pairs, values.data());
    draw_gaps(rng, weight, n_pairs, used, gaps.data());
    int32_t* in = b.inputs.data() + e * seq_len;
    int32_t* tg = b.targets.data() + e * seq_len;
    uint8_t* qm = b.query_mask.data() + e * seq_len;
    for (int i = 0; i < n_pairs; ++i) {
      in[2 * i] = keys[static_cast<size_t>(i)];
      in[2 * i + 1] = values[static_cast<size_t>(i)];
    }
    for (int64_t t = ctx; t < seq_len; ++t) in[t] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    for (int i = 0; i < n_pairs; ++i) {
      const int64_t q = ctx + 2 * static_cast<int64_t>(gaps[static_cast<size_t>(i)]);
      in[q] = keys[static_cast<size_t>(i)];
      tg[q] = values[static_cast<size_t>(i)];
      qm[q] = 1;
    }
  }
  return b;
}

MqarScore score_mqar_predictions(const MqarBatch& batch, const int32_t* predictions) {
  MqarScore s;
  for (size_t i = 0; i < batch.query_mask.size(); ++i) {
    if (!batch.query_mask[i]) continue;
    ++s.total;
    s.correct += predictions[i] == batch.targets[i] ? 1 : 0;
  }
  return s;
}

MqarScore score_mqar_logits(const MqarBatch& batch, const float* logits, int64_t logit_vocab) {
  check(logit_vocab > 0, "MQAR scoring: logit vocabulary must be positive");
  MqarScore s;
  for (size_t i = 0; i < batch.query_mask.size(); ++i) {
    if (!batch.query_mask[i]) continue;
    const float* row = logits + static_cast<int64_t>(i) * logit_vocab;
    int64_t best = -1;  // stays -1 (never correct) for an all-NaN row
    float best_v = -INFINITY;
    for (int64_t v = 0; v < logit_vocab; ++v)
      if (row[v] > best_v || (best < 0 && row[v] == best_v)) {
        best_v = row[v];
        best = v;
      }
    ++s.total;
    s.correct += best == batch.targets[i] ? 1 : 0;
  }
  return s;
}

}  // namespace hw::data

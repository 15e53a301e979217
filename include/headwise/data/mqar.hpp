#pragma once
// Multi-query associative recall (MQAR), the synthetic task of Zoology (Arora et al. 2023),
// used to test whether a model whose heads were frozen/pruned can still retrieve from context.
//
// Layout of one example of length L (even) with P key-value pairs, vocabulary V
// (keys from [1, V/2), values from [V/2, V)):
//   positions [0, 2P):  k_0 v_0 k_1 v_1 ... k_{P-1} v_{P-1}
//                       keys distinct and values distinct within the example (drawn without
//                       replacement, uniformly).
//   positions [2P, L):  S = (L - 2P) / 2 query slots at even offsets. Pair i is queried at
//                       q_i = 2P + 2 g_i, the gaps g_i being distinct draws from {0..S-1}
//                       without replacement with weight (g + 1)^(a - 1), a = 0.01 (a power law
//                       favouring early slots); inputs[q_i] = k_i, in the order of the draws.
//                       Every other position here (odd offsets and unused slots) is a uniform
//                       random token from [0, V) ("random non-queries"; it may equal a key).
//   targets[q_i] = v_i and query_mask[q_i] = 1: reading key k_i at q_i the model must predict
//                  its value as the next token. Elsewhere targets = 0 (a valid id, so a plain
//                  cross-entropy kernel can run; mask those losses out) and query_mask = 0.
// Example e depends only on (seed, e, L, P, V): batches are reproducible by example index.
#include <cstdint>
#include <vector>

namespace hw::data {

constexpr int kMqarVocab = 8192;
constexpr int kMqarSeqLen = 512;
constexpr double kMqarPowerA = 0.01;

struct MqarBatch {
  int64_t n_examples = 0;
  int64_t seq_len = 0;
  std::vector<int32_t> inputs;      // [n_examples, seq_len]
  std::vector<int32_t> targets;     // [n_examples, seq_len]
  std::vector<uint8_t> query_mask;  // [n_examples, seq_len]
};

// Examples first_example_index .. first_example_index + n_examples - 1. Throws hw::Error on
// an odd seq_len, n_pairs < 1, 4 * n_pairs > seq_len, or a vocabulary too small for the keys.
MqarBatch generate_mqar(int64_t n_examples, int64_t seq_len, int n_pairs, int vocab, uint64_t seed,
                        int64_t first_example_index);

struct MqarScore {
  int64_t correct = 0;
  int64_t total = 0;  // query positions seen
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
  MqarScore& operator+=(const MqarScore& o) {
    correct += o.correct;
    total += o.total;
    return *this;
  }
};

// predictions[n_examples * seq_len]: the model's token at every position (e.g. argmax).
MqarScore score_mqar_predictions(const MqarBatch& batch, const int32_t* predictions);
// logits[n_examples * seq_len, logit_vocab] (row-major, logit_vocab >= the task vocabulary,
// e.g. a padded model vocabulary): argmax over the whole row at query positions, lowest index
// on ties; NaN never wins.
MqarScore score_mqar_logits(const MqarBatch& batch, const float* logits, int64_t logit_vocab);

}  // namespace hw::data

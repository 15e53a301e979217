#pragma once
// The tests' own MQAR query count, independent of evaluate_mqar: argmax over the model's whole
// vocabulary at the query positions of the same evaluation examples, hits against the targets.
#include <cstdint>

#include "headwise/data/mqar/mqar_adapt.hpp"

namespace hw::test {

struct MqarCount {
  int64_t hits = 0, total = 0;
};

inline MqarCount count_mqar_hits(Model<float>& m, const MqarOptions& o, int pairs) {
  const data::MqarBatch ex = mqar_eval_examples(o, pairs, 0, o.eval_examples);
  m.forward(ex.inputs.data(), nullptr, o.eval_examples, o.seq_len);
  const float* logits = m.logits();
  const size_t V = size_t(m.config().vocab_size);
  MqarCount c;
  for (size_t i = 0; i < ex.inputs.size(); ++i) {
    if (!ex.query_mask[i]) continue;
    size_t best = 0;
    for (size_t v = 1; v < V; ++v)
      if (logits[i * V + v] > logits[i * V + best]) best = v;
    c.hits += int32_t(best) == ex.targets[i];
    ++c.total;
  }
  return c;
}

}  // namespace hw::test

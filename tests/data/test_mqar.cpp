// MQAR generator: every structural promise of the header, checked by re-parsing the examples.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "headwise/core/error.hpp"
#include "headwise/data/mqar.hpp"

using namespace hw::data;

namespace {

// Re-derives the answer key of one example from its first 2P tokens and checks every query.
void check_example(const MqarBatch& b, int64_t e, int P, int V, std::vector<int64_t>& gaps_out) {
  const int64_t L = b.seq_len;
  const int32_t* in = b.inputs.data() + e * L;
  const int32_t* tg = b.targets.data() + e * L;
  const uint8_t* qm = b.query_mask.data() + e * L;
  std::map<int32_t, int32_t> value_of;
  std::set<int32_t> values;
  for (int i = 0; i < P; ++i) {
    const int32_t k = in[2 * i], v = in[2 * i + 1];
    CHECK(k >= 1);
    CHECK(k < V / 2);
    CHECK(v >= V / 2);
    CHECK(v < V);
    CHECK(value_of.emplace(k, v).second);  // keys distinct
    CHECK(values.insert(v).second);        // values distinct
  }
  std::set<int32_t> queried;
  for (int64_t t = 0; t < L; ++t) {
    CHECK(in[t] >= 0);
    CHECK(in[t] < V);
    if (!qm[t]) {
      CHECK(tg[t] == 0);
      continue;
    }
    REQUIRE(t >= 2 * P);
    CHECK((t - 2 * P) % 2 == 0);  // even offsets in the query region
    const auto it = value_of.find(in[t]);
    REQUIRE(it != value_of.end());  // a query is one of the example's keys...
    CHECK(tg[t] == it->second);     // ...and its target is that key's value
    CHECK(queried.insert(in[t]).second);
    gaps_out.push_back((t - 2 * P) / 2);
  }
  CHECK(queried.size() == static_cast<size_t>(P));  // every key queried exactly once
}

}  // namespace

TEST_CASE("MQAR examples follow the Zoology layout") {
  for (int P : {8, 16, 64}) {
    const MqarBatch b = generate_mqar(40, kMqarSeqLen, P, kMqarVocab, 11, 0);
    REQUIRE(b.inputs.size() == static_cast<size_t>(40 * kMqarSeqLen));
    std::vector<int64_t> gaps;
    for (int64_t e = 0; e < 40; ++e) check_example(b, e, P, kMqarVocab, gaps);
  }
}

TEST_CASE("MQAR query gaps follow a power law, filler tokens are spread over the vocabulary") {
  const int P = 8;
  const MqarBatch b = generate_mqar(500, kMqarSeqLen, P, kMqarVocab, 5, 0);
  std::vector<int64_t> gaps;
  for (int64_t e = 0; e < 500; ++e) check_example(b, e, P, kMqarVocab, gaps);
  const int64_t slots = (kMqarSeqLen - 2 * P) / 2;  // 248
  // With weight ~ 1/g the first quarter of the slots holds about log(62)/log(248) ~ 3/4 of the
  // mass; uniform placement would give 1/4.
  int64_t early = 0;
  for (int64_t g : gaps) early += g < slots / 4 ? 1 : 0;
  CHECK(static_cast<double>(early) / static_cast<double>(gaps.size()) > 0.55);
  // Filler: roughly uniform over [0, V): about half of them are below V/2.
  int64_t low = 0, n = 0;
  for (int64_t e = 0; e < 500; ++e)
    for (int64_t t = 2 * P; t < kMqarSeqLen; ++t) {
      const auto i = static_cast<size_t>(e * kMqarSeqLen + t);
      if (b.query_mask[i]) continue;
      ++n;
      low += b.inputs[i] < kMqarVocab / 2 ? 1 : 0;
    }
  CHECK(static_cast<double>(low) / static_cast<double>(n) == Approx(0.5).margin(0.01));
}

TEST_CASE("MQAR is deterministic per (seed, example index)") {
  const MqarBatch a = generate_mqar(6, 128, 8, 1024, 99, 0);
  const MqarBatch tail = generate_mqar(2, 128, 8, 1024, 99, 4);
  CHECK(std::vector<int32_t>(a.inputs.begin() + 4 * 128, a.inputs.end()) == tail.inputs);
  CHECK(std::vector<int32_t>(a.targets.begin() + 4 * 128, a.targets.end()) == tail.targets);
  CHECK(generate_mqar(6, 128, 8, 1024, 99, 0).inputs == a.inputs);
  CHECK(generate_mqar(6, 128, 8, 1024, 100, 0).inputs != a.inputs);
  std::vector<int64_t> gaps;
  for (int64_t e = 0; e < 2; ++e) check_example(tail, e, 8, 1024, gaps);
}

TEST_CASE("MQAR rejects impossible shapes") {
  CHECK_THROWS_AS(generate_mqar(1, 511, 8, kMqarVocab, 0, 0), hw::Error);  // odd length
  CHECK_THROWS_AS(generate_mqar(1, 64, 17, kMqarVocab, 0, 0), hw::Error);  // 4P > L
  CHECK_THROWS_AS(generate_mqar(1, 64, 0, kMqarVocab, 0, 0), hw::Error);
  CHECK_THROWS_AS(generate_mqar(1, 512, 8, 16, 0, 0), hw::Error);  // 7 keys < 8 pairs
}

TEST_CASE("MQAR scoring counts query positions only, from predictions or logits") {
  const MqarBatch b = generate_mqar(3, 64, 8, 256, 1, 0);
  const size_t n = b.inputs.size();
  // Predictions: right on the first 10 queries, wrong elsewhere; non-query positions hold
  // the target too, which must not count.
  std::vector<int32_t> pred(n);
  int64_t seen = 0;
  for (size_t i = 0; i < n; ++i) {
    pred[i] = b.targets[i];
    if (b.query_mask[i] && seen++ >= 10) pred[i] = b.targets[i] + 1;
  }
  const MqarScore s = score_mqar_predictions(b, pred.data());
  CHECK(s.total == 24);
  CHECK(s.correct == 10);
  CHECK(s.accuracy() == Approx(10.0 / 24.0));

  // Logits over a padded vocabulary of 300 > 256: the argmax may land in the padding.
  const int64_t Vp = 300;
  std::vector<float> logits(n * Vp, 0.0f);
  seen = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!b.query_mask[i]) continue;
    float* row = logits.data() + i * Vp;
    switch (seen++ % 3) {
      case 0: row[b.targets[i]] = 2.0f; break;             // correct
      case 1: row[b.targets[i]] = 2.0f; row[299] = 3.0f; break;  // padding wins: wrong
      default: row[b.targets[i]] = 2.0f; row[0] = 2.0f; break;   // tie: lowest index (0) wins: wrong
    }
  }
  const MqarScore sl = score_mqar_logits(b, logits.data(), Vp);
  CHECK(sl.total == 24);
  CHECK(sl.correct == 8);
}

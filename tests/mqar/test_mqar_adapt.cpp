// MQAR adaptation: the loss counts query positions only, accuracy is an argmax count at the
// queries, SAF calibrated on MQAR installs static heads, and bad sizes are clear errors.
#include <catch2/catch.hpp>

#include "headwise/data/mqar/mqar_adapt.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "methods/reference_gpt.hpp"
#include "support/mqar_count.hpp"

using namespace hw;

namespace {

std::unique_ptr<Model<float>> small_model() {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 32;
  mc.vocab_size = 40;  // larger than the task vocabulary: argmax runs over all 40
  auto m = std::make_unique<Model<float>>(mc, cpu_backend<float>());
  m->init_weights(21);
  return m;
}

MqarOptions small_options() {
  MqarOptions o;
  o.seq_len = 24;
  o.vocab = 32;
  o.train_pairs = 2;
  o.steps = 40;
  o.batch = 8;
  o.lr = 3e-3;
  o.eval_pairs = {2, 4};
  o.eval_examples = 24;
  o.eval_batch = 4;
  o.log_every = 1000;
  return o;
}

}  // namespace

TEST_CASE("MQAR loss targets keep only query positions", "[mqar]") {
  const auto b = data::generate_mqar(3, 24, 2, 32, 7, 0);
  const auto t = mqar_loss_targets(b);
  int queries = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (b.query_mask[i]) {
      CHECK(t[i] == b.targets[i]);
      CHECK(t[i] >= 16);  // values live in the upper half
      ++queries;
    } else {
      CHECK(t[i] == -1);
    }
  }
  CHECK(queries == 3 * 2);
}

TEST_CASE("MQAR adaptation trains on the query loss and accuracy is an argmax count", "[mqar]") {
  auto m = small_model();
  MqarOptions o = small_options();
  // The first update's loss is the reference cross-entropy over the query positions only.
  const auto b = data::generate_mqar(o.batch, o.seq_len, o.train_pairs, o.vocab, o.seed, 0);
  const double ref = test::ReferenceGpt(*m).loss(b.inputs, mqar_loss_targets(b), int(o.batch), int(o.seq_len), {});
  const auto losses = adapt_mqar(*m, o);
  REQUIRE(losses.size() == 40);
  CHECK(losses[0] == Approx(ref).epsilon(2e-6));
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += losses[size_t(i)], last += losses[losses.size() - 1 - size_t(i)];
  CHECK(last < first);
  // Accuracy: count argmax hits at query positions with this test's own loop.
  const auto acc = evaluate_mqar(*m, o);
  REQUIRE(acc.size() == 2);
  for (const auto& a : acc) {
    MqarOptions one = o;
    one.eval_pairs = {a.pairs};
    one.eval_batch = o.eval_examples;  // all at once: a different batching, the same examples
    const auto again = evaluate_mqar(*m, one);
    CHECK(again[0].correct == a.correct);
    CHECK(a.total == o.eval_examples * a.pairs);
  }
  // Independent count: argmax over the whole model vocabulary at the query positions, for
  // every pair count. The counts must be strictly between 0 and all (a degenerate count of
  // none or all would not check the scoring), and accuracy() is their ratio.
  for (size_t k = 0; k < acc.size(); ++k) {
    const int pairs = int(acc[k].pairs);
    INFO("pairs " << pairs);
    const auto [hits, total] = test::count_mqar_hits(*m, o, pairs);
    CHECK(total == o.eval_examples * pairs);
    CHECK(acc[k].total == total);
    CHECK(acc[k].correct == hits);
    CHECK(hits > 0);
    CHECK(hits < total);
    CHECK(acc[k].accuracy() == Approx(double(hits) / double(total)).epsilon(1e-15));
  }
  CHECK(acc[0].pairs == 2);
  CHECK(acc[1].pairs == 4);
}

TEST_CASE("SAF calibrated on MQAR sequences installs static heads before adaptation", "[mqar][saf]") {
  auto m = small_model();
  MqarOptions o = small_options();
  // Reached through the method registry, as `headwise mqar --method` does.
  nlohmann::json method = {{"name", "saf"}, {"ratio", 0.25}, {"calib_seqs", 4}, {"fit_steps", 50}, {"max_kl", 50.0}};
  dist::LocalComm comm;
  const auto c = apply_method_on_mqar(*m, method, o, comm);
  REQUIRE(c.has_value());
  CHECK(c->report["calib_seq_len"] == 24);  // the MQAR sequences, not the method's own data
  CHECK(m->config().head_plan.count(attn::HeadKind::Static) == 2);
  method["mode"] = "prune";
  method["selector"] = "gate_taylor";
  auto p = small_model();
  apply_method_on_mqar(*p, method, o, comm);
  CHECK(p->config().head_plan.count(attn::HeadKind::Pruned) == 2);
  // Adaptation keeps the static patterns fixed (they are buffers, not parameters).
  const HeadExtras before = m->head_extras();
  o.steps = 3;
  adapt_mqar(*m, o);
  const HeadExtras after = m->head_extras();
  for (const auto& [key, v] : before.statics) CHECK(after.statics.at(key).alpha == v.alpha);
}

TEST_CASE("MQAR warm-up: update k of N uses lr (k + 1) / N, then the constant lr", "[mqar]") {
  // The reference for each warm-up update is a run without warm-up at that update's rate: Adam's
  // state after one update does not depend on the rate, so one update must agree bit for bit.
  auto params_of = [](Model<float>& m) {
    const auto* p = static_cast<const unsigned char*>(m.params().base());
    return std::vector<unsigned char>(p, p + m.params().bytes());
  };
  auto after_one_update = [&](double lr, int64_t warmup) {
    auto m = small_model();
    MqarOptions o = small_options();
    o.steps = 1;
    o.lr = lr;
    o.warmup_steps = warmup;
    adapt_mqar(*m, o);
    return params_of(*m);
  };
  const auto untouched = [&] {
    auto m = small_model();
    return params_of(*m);
  }();
  const auto warm = after_one_update(4e-3, 4);  // first of 4 warm-up updates: 1e-3
  CHECK(warm != untouched);
  CHECK(warm == after_one_update(1e-3, 0));
  CHECK(warm != after_one_update(4e-3, 0));
  CHECK(after_one_update(2e-3, 1) == after_one_update(2e-3, 0));  // N = 1 is no warm-up
  // A negative warm-up is an error naming the option.
  auto m = small_model();
  MqarOptions o = small_options();
  o.warmup_steps = -1;
  CHECK_THROWS_WITH(o.validate(m->config()), Catch::Contains("--warmup-steps"));
}

TEST_CASE("MQAR options that the model cannot take are errors naming the option", "[mqar]") {
  auto m = small_model();
  MqarOptions o = small_options();
  o.vocab = 64;
  CHECK_THROWS_WITH(o.validate(m->config()), Catch::Contains("--vocab"));
  o = small_options();
  o.seq_len = 64;
  CHECK_THROWS_WITH(o.validate(m->config()), Catch::Contains("--seq-len"));
  o = small_options();
  o.eval_pairs = {2, 7};
  CHECK_THROWS_WITH(o.validate(m->config()), Catch::Contains("--eval-pairs"));
}

TEST_CASE("A method for MQAR that cannot be built or does not act at step 0 is an error naming it", "[mqar]") {
  auto m = small_model();
  const MqarOptions o = small_options();
  dist::LocalComm comm;
  CHECK_THROWS_WITH(apply_method_on_mqar(*m, {{"name", "nosuch"}}, o, comm), Catch::Contains("nosuch"));
  CHECK_THROWS_WITH(apply_method_on_mqar(*m, {{"name", "saf"}, {"ratoi", 0.25}}, o, comm),
                    Catch::Contains("ratoi"));
  // at_step 1 of a one-update run: after the update, not before it.
  CHECK_THROWS_WITH(apply_method_on_mqar(*m, {{"name", "saf"}, {"at_step", 1}}, o, comm),
                    Catch::Contains("does not act at step 0"));
  CHECK(m->config().head_plan.all_softmax());  // nothing was installed
}

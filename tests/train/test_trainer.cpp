// The training loop: determinism, resume, overfitting one batch, accumulation and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

TEST_CASE("same config and seed give bit-identical losses", "[train]") {
  const std::string dir = test::temp_dir("determinism");
  const RunConfig cfg = RunConfig::from_json(test::tiny_run_doc(dir));
  dist::LocalComm comm;
  Trainer a(cfg, dir + "/a", comm), b(cfg, dir + "/b", comm);
  a.run();
  b.run();
  const auto la = test::losses_of(dir + "/a/metrics.jsonl"), lb = test::losses_of(dir + "/b/metrics.jsonl");
  REQUIRE(la.size() == 6);
  CHECK(la == lb);
  CHECK(la.back() < la.front());  // it learns
}

TEST_CASE("resume reproduces the uninterrupted run exactly", "[train]") {
  const std::string dir = test::temp_dir("resume");
  const RunConfig cfg = RunConfig::from_json(test::tiny_run_doc(dir));
  dist::LocalComm comm;
  const test::ResumeLosses l = test::full_and_resumed_losses(cfg, dir, 3, comm);  // stops after the step-3 checkpoint
  REQUIRE(l.full.size() == 6);
  REQUIRE(l.resumed.size() == 6);
  CHECK(l.full == l.resumed);
}

TEST_CASE("resume reproduces the uninterrupted run exactly with dropout on", "[train][dropout]") {
  const std::string dir = test::temp_dir("resume_dropout");
  auto doc = test::tiny_run_doc(dir);
  doc["model"]["resid_pdrop"] = 0.2;
  doc["model"]["embd_pdrop"] = 0.1;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  const test::ResumeLosses l = test::full_and_resumed_losses(cfg, dir, 3, comm);
  REQUIRE(l.full.size() == 6);
  CHECK(l.full == l.resumed);
  // The masks are on: the same run without dropout has other losses from the first update.
  {
    Trainer plain(RunConfig::from_json(test::tiny_run_doc(dir)), dir + "/plain", comm);
    plain.run();
  }
  const auto plain = test::losses_of(dir + "/plain/metrics.jsonl");
  REQUIRE(plain.size() == 6);
  CHECK(plain.front() != l.full.front());
}

TEST_CASE("a tiny model overfits one batch", "[train]") {
  const std::string dir = test::temp_dir("overfit");
  // Exactly one micro-batch of data: every step sees the same batch.
  test::write_text_like_shard(dir, "one.bin", 2 * 16 + 1, 9, 32);
  auto doc = test::tiny_run_doc(dir);
  doc["data"] = {{"train", dir + "/one.bin"}, {"shuffle", false}};
  doc["train"]["total_batch_tokens"] = 32;
  doc["train"]["steps"] = 150;
  doc["train"]["checkpoint_every"] = 0;
  doc["train"]["eval_every"] = 0;
  doc["train"]["warmup_steps"] = 5;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  Trainer t(cfg, "", comm);
  double first = t.train_step(), last = first;
  for (int i = 1; i < 150; ++i) last = t.train_step();
  INFO("first " << first << " last " << last);
  CHECK(first > 3.0);
  CHECK(last < 0.1);
}

TEST_CASE("gradient accumulation equals one larger micro-batch", "[train]") {
  const std::string dir = test::temp_dir("accum");
  auto doc = test::tiny_run_doc(dir);
  doc["data"]["shuffle"] = false;
  doc["train"]["micro_batch"] = 1;
  doc["train"]["total_batch_tokens"] = 32;
  const RunConfig accum = RunConfig::from_json(doc);
  doc["train"]["micro_batch"] = 2;
  const RunConfig single = RunConfig::from_json(doc);
  REQUIRE(accum.grad_accum() == 2);
  REQUIRE(single.grad_accum() == 1);
  dist::LocalComm comm;
  Trainer a(accum, "", comm), b(single, "", comm);
  for (int i = 0; i < 3; ++i) {
    double na = 0, nb = 0;
    const double la = a.train_step(&na), lb = b.train_step(&nb);
    CHECK(la == Approx(lb).epsilon(1e-5));
    CHECK(na == Approx(nb).epsilon(1e-4));
  }
}

TEST_CASE("bad configs give one clear error naming the key", "[train][errors]") {
  const std::string dir = test::temp_dir("badcfg");
  auto base = test::tiny_run_doc(dir);
  auto expect_error = [&](nlohmann::json doc, const std::string& needle) {
    try {
      RunConfig::from_json(doc);
      FAIL("expected an error mentioning " << needle);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  auto d = base;
  d["train"]["lrr"] = 1;
  expect_error(d, "train.lrr");
  d = base;
  d["train"]["lr"] = "fast";
  expect_error(d, "train.lr");
  d = base;
  d["model"]["n_embd"] = 33;
  expect_error(d, "n_head");
  d = base;
  d["model"]["n_kv_head"] = 3;
  d["model"]["n_head"] = 2;
  expect_error(d, "n_kv_head");
  d = base;
  d["train"]["seq_len"] = 64;
  expect_error(d, "block_size");
  d = base;
  d["train"]["total_batch_tokens"] = 50;
  expect_error(d, "total_batch_tokens");
  d = base;
  d["model"]["head_plan"] = nlohmann::json::parse(R"([["softmax", "window:0"], ["softmax", "softmax"]])");
  expect_error(d, "window");
  d = base;
  d["optimizer"] = nlohmann::json::object();
  expect_error(d, "optimizer");
}

TEST_CASE("missing shards are reported by glob", "[train][errors]") {
  const std::string dir = test::temp_dir("noshard");
  auto doc = test::tiny_run_doc(dir);
  doc["data"]["train"] = dir + "/nothing_*.bin";
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  try {
    Trainer t(cfg, "", comm);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("nothing_*.bin") != std::string::npos);
  }
}

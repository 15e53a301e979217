// train.device, train.tf32 and train.classifier_chunk_rows: parsed, validated with one error
// naming the key, written back by to_json, and "cuda" without a usable GPU refused up front.
#include <catch2/catch.hpp>

#include <cmath>

#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {
void expect_error(const nlohmann::json& doc, const std::string& needle) {
  try {
    RunConfig::from_json(doc);
    FAIL("expected an error mentioning " << needle);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("device, tf32 and classifier chunk keys: defaults, round trip and bad values", "[train][errors][device]") {
  const std::string dir = test::temp_dir("devcfg");
  const auto base = test::tiny_run_doc(dir);
  const RunConfig d = RunConfig::from_json(base);
  CHECK(d.train.device == "cpu");
  CHECK(d.train.tf32);
  CHECK(d.train.classifier_chunk_rows == 0);
  auto doc = base;
  doc["train"]["device"] = "cuda";  // valid in the config; the backend decides whether it can be had
  doc["train"]["tf32"] = false;
  doc["train"]["classifier_chunk_rows"] = 8;
  const RunConfig c = RunConfig::from_json(doc);
  const RunConfig back = RunConfig::from_json(c.to_json());
  CHECK(back.train.device == "cuda");
  CHECK_FALSE(back.train.tf32);
  CHECK(back.train.classifier_chunk_rows == 8);

  auto bad = base;
  bad["train"]["device"] = "gpu";
  expect_error(bad, "train.device");
  bad = base;
  bad["train"]["tf32"] = "yes";
  expect_error(bad, "train.tf32");
  bad = base;
  bad["train"]["classifier_chunk_rows"] = -4;
  expect_error(bad, "train.classifier_chunk_rows");
  bad = base;
  bad["train"]["classifier_chunk_rows"] = 2.5;
  expect_error(bad, "train.classifier_chunk_rows");
}

TEST_CASE("train.device = cuda without a usable GPU is one error naming the key", "[train][errors][device]") {
  const std::string dir = test::temp_dir("nocuda");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["device"] = "cuda";
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  if (device::available()) {
    // A GPU is visible: nothing to refuse. The trainer takes it, and its first step (the same
    // initial weights and batch, fp32 without tf32) gives the CPU trainer's loss up to float
    // summation order (the classifier chunk test below holds 1e-5 for a reordering too).
    // (tiny_gpu_run_doc: head_dim 64, which the CUDA attention kernels take; tiny_run_doc's 8 is not.)
    auto gpu_doc = test::tiny_gpu_run_doc(dir), cpu_doc = gpu_doc;
    gpu_doc["train"]["tf32"] = false;
    cpu_doc["train"]["device"] = "cpu";
    Trainer gpu(RunConfig::from_json(gpu_doc), "", comm), cpu(RunConfig::from_json(cpu_doc), "", comm);
    const double lg = gpu.train_step(), lc = cpu.train_step();
    CHECK(std::isfinite(lg));
    CHECK(lg == Approx(lc).epsilon(1e-5));
    return;
  }
  try {
    Trainer t(cfg, "", comm);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("train.device") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("the trainer's classifier chunks give the same run up to float order", "[train][device]") {
  const std::string dir = test::temp_dir("chunkrun");
  auto doc = test::tiny_run_doc(dir);
  const RunConfig whole = RunConfig::from_json(doc);
  doc["train"]["classifier_chunk_rows"] = 5;
  const RunConfig chunked = RunConfig::from_json(doc);
  dist::LocalComm comm;
  Trainer a(whole, "", comm), b(chunked, "", comm);
  CHECK(b.model().classifier_chunk_rows() == 5);
  CHECK(b.model().activation_bytes() < a.model().activation_bytes());
  for (int step = 0; step < 3; ++step) CHECK(b.train_step() == Approx(a.train_step()).epsilon(1e-5));
}

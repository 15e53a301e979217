// train.precision = "bf16" through the whole training loop on the CPU reference: the run is
// deterministic, resumes exactly (the fp32 master weights and moments are the state; the bf16
// copy is rebuilt from them), and its losses track the fp32 run's within bf16 rounding.
#include <catch2/catch.hpp>
#include <cmath>

#include "headwise/dist/local_comm.hpp"
#include "headwise/train/trainer.hpp"
#include "support/rel_err.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {
nlohmann::json bf16_doc(const std::string& dir) {
  auto doc = test::tiny_run_doc(dir);
  doc["model"]["head_plan"] = nlohmann::json::parse(R"([["softmax", "window:4"], ["static", "softmax"]])");
  doc["train"]["precision"] = "bf16";
  return doc;
}
}  // namespace

TEST_CASE("bf16 training is deterministic, resumes exactly and tracks fp32", "[train][bf16]") {
  const std::string dir = test::temp_dir("bf16_run");
  const RunConfig cfg = RunConfig::from_json(bf16_doc(dir));
  auto fp32_doc = bf16_doc(dir);
  fp32_doc["train"]["precision"] = "fp32";
  const RunConfig cfg32 = RunConfig::from_json(fp32_doc);
  dist::LocalComm comm;
  {
    Trainer b(cfg, dir + "/b", comm), c(cfg32, dir + "/fp32", comm);
    CHECK(b.model().precision() == Precision::Bf16);
    b.run();
    c.run();
  }
  const test::ResumeLosses r = test::full_and_resumed_losses(cfg, dir, 3, comm);
  const auto& la = r.full;
  const auto lb = test::losses_of(dir + "/b/metrics.jsonl"), l32 = test::losses_of(dir + "/fp32/metrics.jsonl");
  REQUIRE(la.size() == 6);
  CHECK(la == lb);
  CHECK(la == r.resumed);
  REQUIRE(l32.size() == 6);
  double worst = 0.0;
  bool differs = false;
  for (size_t i = 0; i < la.size(); ++i) {
    worst = hw::test::worse(worst, hw::test::ratio(hw::test::abs_err(la[i], l32[i]), std::fabs(l32[i])));
    differs = differs || la[i] != l32[i];
  }
  INFO("worst relative loss difference bf16 vs fp32: " << worst);
  CHECK(worst < 1e-2);
  CHECK(differs);                  // the bf16 run did round
  CHECK(la.back() < la.front());   // and it learns
}

TEST_CASE("train.precision accepts fp32 and bf16 only", "[train][bf16][errors]") {
  const std::string dir = test::temp_dir("bf16_bad");
  auto doc = bf16_doc(dir);
  doc["train"]["precision"] = "fp16";
  CHECK_THROWS_WITH(RunConfig::from_json(doc), Catch::Contains("train.precision"));
}

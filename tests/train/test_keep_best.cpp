// train.keep_best: RUN/checkpoints/best holds the model of the evaluation with the lowest val
// loss (read back from metrics.jsonl), and summary.json names it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "headwise/dist/local_comm.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

TEST_CASE("keep_best keeps the checkpoint of the lowest validation loss", "[train][keep_best]") {
  const std::string dir = test::temp_dir("keep_best");
  nlohmann::json doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 8;
  doc["train"]["eval_every"] = 1;
  doc["train"]["checkpoint_every"] = 0;
  doc["train"]["lr"] = 0.05;  // large enough that the val loss does not fall monotonically
  doc["train"]["min_lr"] = 0.05;
  doc["train"]["keep_best"] = true;
  const RunConfig cfg = RunConfig::from_json(doc);
  CHECK(cfg.to_json()["train"]["keep_best"] == true);
  dist::LocalComm comm;
  Trainer tr(cfg, dir + "/run", comm);
  const nlohmann::json summary = tr.run();
  // The lowest val loss of the run and the update count after which it was measured.
  std::ifstream in(dir + "/run/metrics.jsonl");
  std::string line;
  double best = 1e300;
  int64_t best_step = -1;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss") && j["val_loss"].get<double>() < best) {
      best = j["val_loss"].get<double>();
      best_step = j["step"].get<int64_t>() + 1;
    }
  }
  REQUIRE(best_step > 0);
  REQUIRE(summary.contains("best"));
  CHECK(summary["best"]["step"] == best_step);
  CHECK(summary["best"]["val_loss"].get<double>() == best);
  std::ifstream tj(dir + "/run/checkpoints/best/trainer.json");
  REQUIRE(tj.good());
  const auto t = nlohmann::json::parse(tj);
  CHECK(t["step"] == best_step);
  CHECK(t["best"]["step"] == best_step);
  // Its weights evaluate to the recorded loss.
  Trainer again(cfg, "", comm);
  again.init_from(dir + "/run/checkpoints/best");
  CHECK(again.eval().loss == Approx(best).epsilon(1e-6));
}

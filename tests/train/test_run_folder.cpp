// What a run folder holds (headwise/train/run_folder.hpp): which folders are checkpoints, whether
// a folder holds a run, and how a resume cuts the record back to the checkpoint.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/train/run_folder.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {
void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}
std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("run folder: only step_<N> folders holding trainer.json are checkpoints, the newest wins", "[train][run_folder]") {
  const std::string dir = test::temp_dir("newest");
  CHECK_FALSE(newest_checkpoint(dir + "/none"));
  const std::string ck = dir + "/checkpoints/";
  write(ck + "step_3/trainer.json", "{}");
  write(ck + "step_6/trainer.json", "{}");
  write(ck + "step_12.tmp/trainer.json", "{}");  // a save cut short (crash, second signal)
  write(ck + "step_11.old/trainer.json", "{}");  // the moment of a replace
  write(ck + "best/trainer.json", "{}");
  write(ck + "step_x/trainer.json", "{}");
  write(ck + "step_9/model.safetensors", "");    // no trainer.json: not a checkpoint
  write(ck + "step_99999999999999999999/trainer.json", "{}");  // beyond int64: not ours
  write(dir + "/elsewhere/step_50/trainer.json", "{}");
  fs::create_directory_symlink(dir + "/elsewhere/step_50", ck + "step_50");  // links are never taken
  const auto n = newest_checkpoint(dir);
  REQUIRE(n);
  CHECK(n->step == 6);
  CHECK(n->dir == ck + "step_6");
  // A link in place of checkpoints/ is refused, not followed.
  const std::string other = test::temp_dir("newest_link");
  fs::create_directory_symlink(dir + "/checkpoints", other + "/checkpoints");
  CHECK_THROWS_WITH(newest_checkpoint(other), Catch::Contains("is a symbolic link"));
}

TEST_CASE("run folder: what counts as an earlier run", "[train][run_folder]") {
  const std::string dir = test::temp_dir("holds");
  CHECK_FALSE(holds_run(dir + "/missing"));
  CHECK_FALSE(holds_run(dir));
  write(dir + "/.lock", "{}");
  write(dir + "/metrics.jsonl", "");           // a start that logged nothing
  write(dir + "/checkpoints/step_2.tmp/x", "");  // nor saved anything
  CHECK_FALSE(holds_run(dir));
  write(dir + "/metrics.jsonl", "{\"step\": 0, \"loss\": 3}\n");
  CHECK(holds_run(dir));
  fs::remove(dir + "/metrics.jsonl");
  write(dir + "/checkpoints/best/trainer.json", "{}");
  CHECK(holds_run(dir));
}

TEST_CASE("run folder: a resume keeps the record before the checkpoint's step and drops the rest", "[train][run_folder]") {
  const std::string dir = test::temp_dir("truncate");
  // Steps 0..5 and evaluations after 2 and 5, then a line cut short by a kill, and one without a step.
  std::string m;
  for (int s = 0; s < 6; ++s) {
    m += "{\"step\": " + std::to_string(s) + ", \"loss\": " + std::to_string(4.0 - 0.1 * s) + "}\n";
    if (s == 2 || s == 5) m += "{\"step\": " + std::to_string(s) + ", \"val_loss\": 3.5}\n";
  }
  m += "{\"step\": 6, \"lo";
  write(dir + "/metrics.jsonl", m + "\n{\"note\": 1}\n");
  for (const char* f : {"step_2.0.saf.json", "step_4.0.saf.json", "step_5.1.aah.json", "step_10.0.saf.json", "notes.txt"})
    write(dir + "/interventions/" + f, "{}");
  // Resuming at checkpoint step_4: updates 0..3 (and the evaluation after update 2) stay.
  CHECK(truncate_run_record(dir, 4, 10) == 5);
  const auto kept = lines_of(dir + "/metrics.jsonl");
  REQUIRE(kept.size() == 5);
  CHECK(kept[0] == "{\"step\": 0, \"loss\": 4.000000}");
  CHECK(kept[3] == "{\"step\": 2, \"val_loss\": 3.5}");
  CHECK(kept[4] == "{\"step\": 3, \"loss\": 3.700000}");
  // The intervention at step 4 is redone after the resume; the one at 2 is in the checkpoint.
  CHECK(fs::exists(dir + "/interventions/step_2.0.saf.json"));
  CHECK_FALSE(fs::exists(dir + "/interventions/step_4.0.saf.json"));
  CHECK_FALSE(fs::exists(dir + "/interventions/step_5.1.aah.json"));
  CHECK_FALSE(fs::exists(dir + "/interventions/step_10.0.saf.json"));
  CHECK(fs::exists(dir + "/interventions/notes.txt"));
  // At the final step a planner acting after the last update already acted inside the checkpoint.
  write(dir + "/interventions/step_10.0.saf.json", "{}");
  CHECK(truncate_run_record(dir, 10, 10) == 0);
  CHECK(fs::exists(dir + "/interventions/step_10.0.saf.json"));
}

TEST_CASE("run folder: a run resumed in its own folder after a crash logs each step once, as the uninterrupted run",
          "[train][run_folder]") {
  const std::string dir = test::temp_dir("own_folder");
  const RunConfig cfg = RunConfig::from_json(test::tiny_run_doc(dir));  // 6 steps, checkpoints at 3 and 6
  dist::LocalComm comm;
  {
    Trainer full(cfg, dir + "/full", comm);
    full.run();
  }
  {
    Trainer crashed(cfg, dir + "/run", comm);
    crashed.run(5);  // "killed" after update 5: its log runs past the step-3 checkpoint
  }
  REQUIRE(test::losses_of(dir + "/run/metrics.jsonl").size() == 5);
  {
    Trainer resumed(cfg, dir + "/run", comm);
    resumed.resume(dir + "/run/checkpoints/step_3");
    resumed.run();
  }
  // Line for line the uninterrupted run's record, losses bit for bit, timings aside.
  auto strip = [](const std::string& path) {
    std::vector<nlohmann::json> out;
    for (const auto& l : lines_of(path)) {
      auto j = nlohmann::json::parse(l);
      for (const char* k : {"ms", "update_ms", "tok_per_s"}) j.erase(k);
      out.push_back(j);
    }
    return out;
  };
  const auto full = strip(dir + "/full/metrics.jsonl"), run = strip(dir + "/run/metrics.jsonl");
  REQUIRE(full.size() == 8);  // 6 updates, 2 evaluations
  CHECK(run == full);
}

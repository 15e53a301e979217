// A run folder is never clobbered (issue 52): one writer at a time, the same command resumes or
// reports a finished run, --overwrite moves the old run aside, and SIGTERM / SIGUSR1 stop a run
// with a checkpoint. The real binary, as separate processes killed and signalled from here; the
// reference for every resumed run is the same config run once without interruption, compared
// bit for bit (losses as logged, checkpoint bytes).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "cli/cli_util.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/io/files.hpp"

using namespace hw;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

// A training process started in the background, its output in a log file.
class Spawned {
 public:
  Spawned(const std::vector<std::string>& args, const std::string& log) : log_(log) {
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(HEADWISE_BINARY));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(HEADWISE_BINARY, argv.data());
      ::_exit(127);
    }
  }
  ~Spawned() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit status, or 128 + the signal that ended it.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string output() const { return io::read_file(log_); }

 private:
  pid_t pid_ = -1;
  std::string log_;
  bool waited_ = false;
};

// Polls `ready` for up to 60 s (the machine may be loaded); false when it never held.
bool eventually(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The per-update lines of a metrics.jsonl ("loss" lines), in order.
std::vector<nlohmann::json> updates_of(const std::string& metrics) {
  std::vector<nlohmann::json> out;
  if (!fs::exists(metrics)) return out;
  std::ifstream in(metrics);
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);  // (a line being written may be cut)
    if (j.is_object() && j.contains("loss")) out.push_back(j);
  }
  return out;
}

// Each step 0..steps-1 once, in order, with the reference's losses bit for bit.
void same_record(const std::string& metrics, const std::string& reference, int steps) {
  const auto got = updates_of(metrics), want = updates_of(reference);
  REQUIRE(int(want.size()) == steps);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("update " << i);
    CHECK(got[i]["step"] == int64_t(i));
    CHECK(got[i]["loss"].get<double>() == want[i]["loss"].get<double>());
  }
}

// Every file under `dir`, relative path -> bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = io::read_file(e.path().string());
  return out;
}

// A learnable token stream and a config whose updates take a few milliseconds each (~3 ms on
// one core): the runs that are killed or signalled take 300 of them, so about a second remains
// after the moment the test waits for, however the test process itself is scheduled.
std::string make_run(const std::string& dir, int steps, int checkpoint_every) {
  std::vector<uint16_t> toks(20000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 5 + i / 7) % 60);
  data::write_shard(dir + "/train_0.bin", toks);
  data::write_shard(dir + "/val_0.bin", std::vector<uint16_t>(toks.begin(), toks.begin() + 3000));
  const std::string cfg = dir + "/run.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 64, "vocab_size": 64},
    "train": {"micro_batch": 4, "seq_len": 64, "steps": )" + std::to_string(steps) + R"(, "lr": 3e-3,
              "warmup_steps": 2, "eval_every": 10, "eval_batches": 2, "checkpoint_every": )" +
                            std::to_string(checkpoint_every) + R"(, "seed": 11, "threads": 1},
    "data": {"train": ")" + dir + R"(/train_*.bin", "val": ")" + dir + R"(/val_*.bin", "shuffle": true}
  })");
  return cfg;
}

std::vector<std::string> train_args(const std::string& cfg, const std::string& out,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"train", "--config", cfg, "--out", out};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

test::CmdResult run_train(const std::string& cfg, const std::string& out, const std::string& extra = "") {
  return test::run_headwise("train --config " + cfg + " --out " + out + (extra.empty() ? "" : " " + extra));
}

}  // namespace

TEST_CASE("run folder: two train processes 0.3 s apart on one --out: one is refused, each step is logged once",
          "[cli][run_folder]") {
  const std::string dir = test::cli_temp_dir("rf_two");
  const std::string cfg = make_run(dir, 300, 100), out = dir + "/run";  // ~1 s of updates
  Spawned a(train_args(cfg, out), dir + "/a.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Spawned b(train_args(cfg, out), dir + "/b.log");
  const int ca = a.wait(), cb = b.wait();
  INFO("a: " << a.output() << "\nb: " << b.output());
  // Exactly one ran (normally the first; on a loaded machine the second may have won the lock).
  REQUIRE(((ca == 0 && cb == 1) || (ca == 1 && cb == 0)));
  const std::string refused = ca == 1 ? a.output() : b.output();
  const pid_t winner = ca == 0 ? a.pid() : b.pid();
  CHECK(test::error_lines(refused) == 1);
  CHECK_THAT(refused, Contains("error: '" + out + "' is in use by another headwise process (train, pid " +
                               std::to_string(winner) + " on host "));
  const auto lines = updates_of(out + "/metrics.jsonl");
  REQUIRE(lines.size() == 300);
  for (size_t i = 0; i < lines.size(); ++i) CHECK(lines[i]["step"] == int64_t(i));
  CHECK_FALSE(fs::exists(out + "/.lock"));  // released by the winner
}

TEST_CASE("run folder: the same command over a finished run changes nothing, over an unfinished one it refuses",
          "[cli][run_folder]") {
  const std::string dir = test::cli_temp_dir("rf_again");
  const std::string cfg = make_run(dir, 12, 4), out = dir + "/run";
  REQUIRE(run_train(cfg, out).code == 0);
  const auto before = snapshot(out);
  REQUIRE(before.count("checkpoints/step_12/model.safetensors"));
  for (const std::string flag : {"", "--resume auto"}) {
    const auto again = run_train(cfg, out, flag);
    INFO(flag << ": " << again.out);
    CHECK(again.code == 0);
    CHECK_THAT(again.out, Contains(out + " is complete: " + out + "/checkpoints/step_12 reached train.steps = 12"));
    CHECK(snapshot(out) == before);  // checkpoints, metrics, summary: byte for byte
  }
  // A run that stopped part-way (its final checkpoint gone): one error naming the newest
  // checkpoint and both ways on; nothing written.
  fs::remove_all(out + "/checkpoints/step_12");
  fs::remove(out + "/summary.json");
  const auto partial = snapshot(out);
  const auto r = run_train(cfg, out);
  test::expect_one_error(r, "--out " + out + " already holds a run (its newest checkpoint is " + out +
                                "/checkpoints/step_8 (step 8 of train.steps 12)); train never starts over in place: "
                                "--resume auto continues it from its newest checkpoint, --overwrite moves it aside");
  CHECK(snapshot(out) == partial);
}

TEST_CASE("run folder: --resume auto over a run SIGKILLed mid-way ends as the uninterrupted run, bit for bit",
          "[cli][run_folder]") {
  const std::string dir = test::cli_temp_dir("rf_kill");
  const std::string cfg = make_run(dir, 300, 10), ref = dir + "/ref", out = dir + "/run";
  // The reference, with --resume auto in an empty folder: the first submission starts fresh.
  const auto first = run_train(cfg, ref, "--resume auto");
  INFO(first.out);
  REQUIRE(first.code == 0);
  {
    Spawned victim(train_args(cfg, out), dir + "/victim.log");
    // Killed past its step-10 checkpoint, in the middle of later updates.
    REQUIRE(eventually([&] { return fs::exists(out + "/checkpoints/step_10") && updates_of(out + "/metrics.jsonl").size() >= 13; }));
    victim.signal(SIGKILL);
    CHECK(victim.wait() == 128 + SIGKILL);
  }
  CHECK(updates_of(out + "/metrics.jsonl").size() < 300);
  const auto r = run_train(cfg, out, "--resume auto");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("--resume auto: continuing " + out + " from " + out + "/checkpoints/step_"));
  same_record(out + "/metrics.jsonl", ref + "/metrics.jsonl", 300);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    CHECK(io::read_file(out + "/checkpoints/step_300/" + f) == io::read_file(ref + "/checkpoints/step_300/" + f));
}

TEST_CASE("run folder: --overwrite moves the earlier run aside whole and starts again", "[cli][run_folder]") {
  const std::string dir = test::cli_temp_dir("rf_overwrite");
  const std::string cfg = make_run(dir, 8, 4), out = dir + "/run";
  REQUIRE(run_train(cfg, out).code == 0);
  const auto before = snapshot(out);
  const auto r = run_train(cfg, out, "--overwrite --set train.steps=6");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::vector<std::string> aside;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("run.old-", 0) == 0) aside.push_back(e.path().string());
  REQUIRE(aside.size() == 1);
  CHECK_THAT(r.out, Contains("--overwrite: moved the earlier run in " + out + " to " + aside[0]));
  CHECK(snapshot(aside[0]) == before);  // every file of the old run, byte for byte
  CHECK(updates_of(out + "/metrics.jsonl").size() == 6);  // the new run, from step 0
  CHECK(fs::exists(out + "/checkpoints/step_6/model.safetensors"));
  CHECK_FALSE(fs::exists(out + "/checkpoints/step_8"));
  test::expect_one_error(run_train(cfg, out, "--overwrite --resume auto"), "--overwrite and --resume are exclusive");
}

TEST_CASE("run folder: SIGTERM and SIGUSR1 during an update: a checkpoint of that update, exit status 75, and "
          "the resumed run ends as the uninterrupted one",
          "[cli][run_folder][signals]") {
  const std::string dir = test::cli_temp_dir("rf_signal");
  const std::string cfg = make_run(dir, 300, 1000), ref = dir + "/ref", out = dir + "/run";  // no periodic checkpoints
  REQUIRE(run_train(cfg, ref).code == 0);
  int interruptions = 0;
  for (int sig : {SIGTERM, SIGUSR1}) {
    Spawned job(train_args(cfg, out, {"--resume", "auto"}), dir + "/job.log");
    const size_t from = updates_of(out + "/metrics.jsonl").size();
    REQUIRE(eventually([&] { return updates_of(out + "/metrics.jsonl").size() >= from + 3; }));
    job.signal(sig);
    const int code = job.wait();
    const std::string log = job.output();
    INFO(log);
    REQUIRE(code == 75);
    ++interruptions;
    // The checkpoint is of the last logged update: the one under way when the signal came.
    const size_t n = updates_of(out + "/metrics.jsonl").size();
    const std::string ck = out + "/checkpoints/step_" + std::to_string(n);
    CHECK_THAT(log, Contains(std::string(sig == SIGTERM ? "SIGTERM" : "SIGUSR1") + ": stopping after this update"));
    CHECK_THAT(log, Contains("after update " + std::to_string(n) + ": checkpoint " + ck + "; exit status 75"));
    const auto tj = nlohmann::json::parse(io::read_file(ck + "/trainer.json"));
    CHECK(tj["step"] == int64_t(n));
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "config.json"}) CHECK(fs::exists(ck + "/" + f));
    CHECK_FALSE(fs::exists(ck + ".tmp"));
    CHECK_FALSE(fs::exists(out + "/summary.json"));
  }
  REQUIRE(interruptions == 2);
  const auto r = run_train(cfg, out, "--resume auto");
  INFO(r.out);
  REQUIRE(r.code == 0);
  same_record(out + "/metrics.jsonl", ref + "/metrics.jsonl", 300);
  CHECK(io::read_file(out + "/checkpoints/step_300/model.safetensors") ==
        io::read_file(ref + "/checkpoints/step_300/model.safetensors"));
}

TEST_CASE("run folder: a second signal exits at once (128 + signal) and resume never takes a .tmp folder",
          "[cli][run_folder][signals]") {
  const std::string dir = test::cli_temp_dir("rf_second");
  const std::string cfg = make_run(dir, 300, 50), ref = dir + "/ref", out = dir + "/run";
  REQUIRE(run_train(cfg, ref).code == 0);
  {
    Spawned job(train_args(cfg, out), dir + "/job.log");
    REQUIRE(eventually([&] { return updates_of(out + "/metrics.jsonl").size() >= 3; }));
    // Two different signals back to back: both are delivered (two pending SIGTERMs would merge
    // into one), the second while the first's update is still under way.
    job.signal(SIGTERM);
    job.signal(SIGUSR1);
    const int code = job.wait();
    INFO(job.output());
    CHECK((code == 128 + SIGTERM || code == 128 + SIGUSR1));
    CHECK_THAT(job.output(), Contains("second stop signal: exiting now"));
    CHECK_THAT(job.output(), !Contains("exit status 75"));
  }
  // Whatever the second signal cut short is a step_N.tmp; plant one newer than every checkpoint,
  // complete-looking but wrong: --resume auto must take the newest real checkpoint instead.
  const std::string planted = out + "/checkpoints/step_299.tmp";
  fs::create_directories(planted);
  test::write_text(planted + "/trainer.json", R"({"step": 299, "next_batch": 0, "tokens": 0})");
  const auto r = run_train(cfg, out, "--resume auto");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, !Contains("step_299.tmp"));
  same_record(out + "/metrics.jsonl", ref + "/metrics.jsonl", 300);
}

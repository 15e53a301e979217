// A-B-B-A update-speed protocol (update_speed_abba.hpp): spawn, collect, pair, median.
#include "headwise/experiment/update_speed_abba.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/io/files.hpp"

extern char** environ;

namespace hw {

namespace {

// The last "error: ..." line of a process's log, without the prefix ("" when none).
std::string error_line_of(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.rfind("error: ", 0) == 0) last = line.substr(7);
  return last;
}

// Runs argv to completion with stdout and stderr in `log`; returns the wait status.
int spawn_and_wait(const std::vector<std::string>& args, const std::string& log, const std::string& what) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);  // a link there is not followed
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  check(rc == 0, what + ": cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    check(errno == EINTR, what + ": waiting for process " + std::to_string(pid) + ": " + std::strerror(errno));
  return status;
}

}  // namespace

int abba_side(int k) {
  const int r = k % 4;
  return r == 1 || r == 2 ? 1 : 0;
}

std::vector<std::pair<double, double>> abba_pairs(const std::vector<double>& ms) {
  check(!ms.empty() && ms.size() % 4 == 0, "A-B-B-A: " + std::to_string(ms.size()) +
                                               " process times do not make whole rounds of 4");
  std::vector<std::pair<double, double>> pairs;
  for (size_t r = 0; r < ms.size(); r += 4) {
    pairs.emplace_back(ms[r], ms[r + 1]);      // A B
    pairs.emplace_back(ms[r + 3], ms[r + 2]);  // B A
  }
  return pairs;
}

double median_pair_ratio(const std::vector<std::pair<double, double>>& pairs) {
  check(!pairs.empty(), "A-B-B-A: no pairs");
  std::vector<double> r;
  for (const auto& [a, b] : pairs) {
    check(a > 0 && b > 0, "A-B-B-A: a process reported a non-positive update time");
    r.push_back(a / b);
  }
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  return n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
}

nlohmann::json run_abba(const AbbaOptions& o, const std::string& plan_a, const std::string& plan_b) {
  check(o.rounds >= 1, "A-B-B-A: rounds must be >= 1");
  check(o.warmup >= 0 && o.steps >= 1, "A-B-B-A: warm-up must be >= 0 and timed updates >= 1");
  check(!o.exe.empty(), "A-B-B-A: no headwise binary to run");
  io::ensure_dir(o.work_dir);
  nlohmann::json procs = nlohmann::json::array();
  std::vector<double> ms;
  for (int k = 0; k < 4 * o.rounds; ++k) {
    const int side = abba_side(k);
    const std::string& plan = side == 0 ? plan_a : plan_b;
    const std::string base = o.work_dir + "/process_" + std::to_string(k) + (side == 0 ? "_A" : "_B");
    std::filesystem::remove(base + ".json");
    std::vector<std::string> args = {o.exe, "bench", "--config", o.config};
    for (const auto& s : o.sets) args.insert(args.end(), {"--set", s});
    args.insert(args.end(), {"--time-plan", plan, "--warmup", std::to_string(o.warmup), "--steps",
                             std::to_string(o.steps), "--result", base + ".json"});
    const std::string what = "A-B-B-A process " + std::to_string(k) + " (" + (side == 0 ? "A" : "B") + ", plan " +
                             plan + ")";
    const int status = spawn_and_wait(args, base + ".log", what);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !std::filesystem::exists(base + ".json")) {
      const std::string err = error_line_of(base + ".log");
      fail(what + " failed" + (err.empty() ? " (status " + std::to_string(status) + "; log " + base + ".log)" : ": " + err));
    }
    nlohmann::json r = read_json_file(base + ".json");
    r["side"] = side == 0 ? "A" : "B";
    ms.push_back(r.at("mean_ms").get<double>());
    procs.push_back(std::move(r));
  }
  const auto pairs = abba_pairs(ms);
  nlohmann::json ratios = nlohmann::json::array();
  for (const auto& [a, b] : pairs) ratios.push_back(a / b);
  return {{"plan_a", plan_a},       {"plan_b", plan_b}, {"rounds", o.rounds},
          {"warmup", o.warmup},     {"steps", o.steps}, {"processes", procs},
          {"pair_ratios", ratios},  {"speedup", median_pair_ratio(pairs)}};
}

}  // namespace hw

#include "headwise/train/run_folder.hpp"

#include <sys/stat.h>

#include <cctype>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"

namespace hw {

namespace fs = std::filesystem;

namespace {

// step_<digits> -> digits (at most 18 of them: fits an int64); anything else -> nullopt.
std::optional<int64_t> step_of_name(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18) return std::nullopt;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::stoll(digits);
}

bool is_real_dir(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::directory;
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::regular;
}

}  // namespace

std::optional<RunCheckpoint> newest_checkpoint(const std::string& run_dir) {
  const fs::path ck = fs::path(run_dir) / "checkpoints";
  io::refuse_symlink(ck.string());
  if (!is_real_dir(ck)) return std::nullopt;
  std::optional<RunCheckpoint> best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ck, ec)) {
    const auto step = step_of_name(e.path().filename().string(), "step_");
    if (!step || !is_real_dir(e.path()) || !is_regular(e.path() / "trainer.json")) continue;
    if (!best || *step > best->step) best = RunCheckpoint{*step, e.path().string()};
  }
  check(!ec, "cannot list '" + ck.string() + "': " + ec.message());
  return best;
}

bool holds_run(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!is_real_dir(dir)) return false;
  for (const char* f : {"metrics.jsonl", "summary.json", "checkpoints"}) io::refuse_symlink((dir / f).string());
  std::error_code ec;
  if (is_regular(dir / "summary.json")) return true;
  if (is_regular(dir / "metrics.jsonl") && fs::file_size(dir / "metrics.jsonl", ec) > 0 && !ec) return true;
  if (newest_checkpoint(run_dir)) return true;
  return is_real_dir(dir / "checkpoints" / "best");
}

std::string move_run_aside(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir).lexically_normal();
  const fs::path base = dir.has_filename() ? dir : dir.parent_path();
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm {};
  ::gmtime_r(&t, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::string aside = base.string() + ".old-" + stamp;
  std::error_code ec;
  for (int k = 2; fs::exists(fs::symlink_status(aside, ec)); ++k)
    aside = base.string() + ".old-" + stamp + "-" + std::to_string(k);
  fs::rename(base, aside, ec);
  check(!ec, "--overwrite: cannot move '" + base.string() + "' aside to '" + aside + "': " + ec.message());
  return aside;
}

int64_t truncate_run_record(const std::string& run_dir, int64_t step, int64_t train_steps) {
  const fs::path dir(run_dir);
  int64_t dropped = 0;
  const std::string metrics = (dir / "metrics.jsonl").string();
  io::refuse_symlink(metrics);
  if (is_regular(metrics)) {
    std::istringstream in(io::read_file(metrics));
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      nlohmann::json j;
      try {
        j = parse_json(line, metrics);
      } catch (const Error&) {  // a line cut short: it belongs to no complete update
      }
      const auto s = j.is_object() && j.contains("step") ? json_integer(j["step"]) : std::nullopt;
      if (s && *s >= 0 && *s < step) {
        kept += line;
        kept += '\n';
      } else {
        ++dropped;
      }
    }
    if (dropped > 0) io::write_file_atomic(metrics, kept);
  }
  const fs::path iv = dir / "interventions";
  io::refuse_symlink(iv.string());
  if (is_real_dir(iv)) {
    std::vector<fs::path> stale;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(iv, ec)) {
      // step_<s>.<index>.<planner>.json
      const std::string name = e.path().filename().string();
      const auto s = step_of_name(name.substr(0, name.find('.')), "step_");
      if (s && (*s > step || (*s == step && step < train_steps))) stale.push_back(e.path());
    }
    for (const auto& p : stale) fs::remove(p, ec);
  }
  return dropped;
}

}  // namespace hw

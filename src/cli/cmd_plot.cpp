// `headwise plot RUN... [--out FILE.png]`: loss, validation perplexity, learning rate and tokens/s
// curves of training runs from their metrics.jsonl, with each run's interventions (the plan changes
// under RUN/interventions/) marked, because a researcher looks at curves before tables.
// The binary reads and checks the runs and writes the CSV the figure is drawn from (FILE.csv beside
// the PNG); matplotlib draws it, with scripts/plot_runs.py embedded at build time (plot_runs_py.hpp).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>
#include <sstream>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "plot_runs_py.hpp"

extern char** environ;

namespace hw::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kColumns[] = {"loss", "val_loss", "val_ppl", "lr", "tok_per_s"};

struct PlotArgs {
  std::vector<std::string> runs;
  std::string out;
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string number(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

// One run's rows of the CSV: every metrics line, then every intervention.
std::string run_rows(const std::string& run_dir, const std::string& label) {
  const std::string metrics = run_dir + "/metrics.jsonl";
  check(fs::is_regular_file(metrics), "plot: '" + run_dir + "' has no metrics.jsonl (not a training run directory?)");
  std::ifstream in(metrics);
  check(in.is_open(), "plot: cannot open '" + metrics + "'");
  std::string rows, line;
  int64_t line_no = 0, kept = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = metrics + " line " + std::to_string(line_no);
    const json j = parse_json(line, "plot: " + where);
    check(j.is_object() && j.contains("step") && j["step"].is_number_integer(), "plot: " + where + " has no integer \"step\"");
    rows += csv_field(label) + "," + std::to_string(j["step"].get<int64_t>());
    for (const char* col : kColumns) {
      rows += ",";
      if (!j.contains(col)) continue;
      check(j[col].is_number(), "plot: " + where + ": \"" + col + "\" is not a number");
      rows += number(j[col].get<double>());
    }
    rows += ",\n";
    ++kept;
  }
  check(!in.bad(), "plot: read error in '" + metrics + "'");
  check(kept > 0, "plot: '" + metrics + "' is empty (the run logged no step)");
  const fs::path dir = fs::path(run_dir) / "interventions";
  if (fs::is_directory(dir)) {
    std::set<fs::path> files;  // sorted, so the CSV does not depend on directory order
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") files.insert(e.path());
    for (const fs::path& p : files) {
      const json j = read_json(p.string(), "plot: '" + p.string() + "'");
      check(j.is_object() && j.contains("step") && j["step"].is_number_integer() && j.contains("planner") &&
                j["planner"].is_string(),
            "plot: '" + p.string() + "' lacks an integer \"step\" or a \"planner\" name");
      rows += csv_field(label) + "," + std::to_string(j["step"].get<int64_t>()) + ",,,,," + "," +
              csv_field(j["planner"].get<std::string>()) + "\n";
    }
  }
  return rows;
}

// Labels: each run directory's name, or the path as given where two runs share a name.
std::vector<std::string> run_labels(const std::vector<std::string>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs) {
    fs::path p(r);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "run/" -> "run"
    names.push_back(p.filename().string().empty() ? r : p.filename().string());
  }
  std::vector<std::string> labels = names;
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t k = 0; k < runs.size(); ++k)
      if (k != i && names[k] == names[i]) labels[i] = runs[i];
  return labels;
}

// The interpreter: $HEADWISE_PYTHON, else Debian's /usr/bin/python3 (where python3-matplotlib
// lives; a pyenv or venv python3 earlier in PATH usually lacks it), else python3 from PATH.
std::string python_path() {
  if (const char* env = std::getenv("HEADWISE_PYTHON"); env && *env) return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// Runs `PYTHON -s script csv png`; returns its exit status. The user's site-packages are left
// out (-s): a pip-installed numpy built for another matplotlib must not break Debian's.
int run_python(const std::string& script, const std::string& csv, const std::string& png) {
  const std::string python = python_path();
  std::vector<std::string> args = {python, "-s", script, csv, png};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
  check(rc == 0, "plot: cannot run '" + python + "' (" + std::strerror(rc) +
                     "); plotting needs python3 with matplotlib (Debian: python3-matplotlib; or set HEADWISE_PYTHON)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    check(errno == EINTR, "plot: waiting for python3 failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand("plot", "Draw loss, validation PPL, learning rate and tokens/s curves of runs");
  cmd->add_option("runs", a->runs, "Run directories (each with a metrics.jsonl)")->required();
  cmd->add_option("--out", a->out, "PNG to write (default: FIRST_RUN/curves.png); the CSV goes beside it");
  cmd->callback([a] {
    const std::string png = a->out.empty() ? a->runs.front() + "/curves.png" : a->out;
    check(fs::path(png).extension() == ".png", "plot: --out '" + png + "' must end in .png");
    const std::vector<std::string> labels = run_labels(a->runs);
    std::string csv = "run,step,loss,val_loss,val_ppl,lr,tok_per_s,intervention\n";
    for (size_t i = 0; i < a->runs.size(); ++i) csv += run_rows(a->runs[i], labels[i]);
    const std::string csv_path = fs::path(png).replace_extension(".csv").string();
    io::write_file_atomic(csv_path, csv);
    const std::string script =
        (fs::temp_directory_path() / ("headwise_plot_runs." + std::to_string(getpid()) + ".py")).string();
    io::write_file_atomic(script, kPlotRunsPy);
    const std::string tmp_png = png + ".tmp.png";  // matplotlib picks the format by extension
    const int status = run_python(script, csv_path, tmp_png);
    fs::remove(script);
    if (status != 0) {
      fs::remove(tmp_png);
      check(status != 3, "plot: '" + python_path() + "' has no matplotlib (Debian: python3-matplotlib, which scripts/setup.sh "
                         "installs; or point HEADWISE_PYTHON at an interpreter that has it)");
      throw Error("plot: python3 failed drawing '" + png + "' (exit " + std::to_string(status) + ")");
    }
    fs::rename(tmp_png, png);
    spdlog::info("plot: {} run(s) -> {} (data: {})", a->runs.size(), png, csv_path);
  });
}

}  // namespace hw::cli

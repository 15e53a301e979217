#pragma once
// Run the headwise binary and capture its exit code and output.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace hw::test {

struct CmdResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline CmdResult run_headwise(const std::string& args) {
  // Appended piece by piece: GCC 12 warns (-Warray-bounds, a false positive) on the chained
  // operator+ once this header is inlined into some test files.
  std::string cmd = "OMP_NUM_THREADS=1 ";
  cmd += HEADWISE_BINARY;
  cmd += ' ';
  cmd += args;
  cmd += " 2>&1";
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof(buf), p)) r.out += buf;
  const int status = p ? pclose(p) : -1;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string cli_temp_dir(const std::string& name) { return scratch_dir("cli_" + name); }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The last line of the output that parses as a JSON object.
inline nlohmann::json last_json_line(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  nlohmann::json last;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) last = j;
  }
  return last;
}

// Lines that start with "error:".
inline int error_lines(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind("error:", 0) == 0;
  return n;
}

}  // namespace hw::test

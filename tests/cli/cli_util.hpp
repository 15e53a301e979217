#pragma once
// Run the headwise binary and capture its exit code and output.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// The binary the bad-input tests run: HEADWISE_TEST_BINARY when set (the sanitizer build's,
// tests/scripts/sanitize.sh), else the one built with these tests.
inline std::string tested_binary() {
  const char* b = std::getenv("HEADWISE_TEST_BINARY");
  return b && *b ? b : HEADWISE_BINARY;
}

struct LimitedResult : CmdResult {
  double seconds = 0;
};

// run_headwise under limits: virtual memory (ulimit -v; skipped for a sanitizer binary, whose
// shadow memory needs terabytes of address space: HEADWISE_TEST_NO_ULIMIT=1) and wall time
// (timeout: a hang ends as exit 124), with the wall time measured.
inline LimitedResult run_limited(const std::string& args, int64_t mem_mib = 4096, int timeout_s = 120) {
  std::string cmd = "OMP_NUM_THREADS=2 bash -c '";
  if (!std::getenv("HEADWISE_TEST_NO_ULIMIT")) cmd += "ulimit -v " + std::to_string(mem_mib * 1024) + " && ";
  cmd += "exec timeout " + std::to_string(timeout_s) + " \"$0\" \"$@\"' ";
  cmd += tested_binary();
  cmd += ' ';
  cmd += args;
  cmd += " 2>&1";
  LimitedResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof(buf), p)) r.out += buf;
  const int status = p ? pclose(p) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

// The CLI's answer to bad input: exit 1 and one `error:` line that names the culprit (needle).
inline void expect_one_error(const CmdResult& r, const std::string& needle) {
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(error_lines(r.out) == 1);
  CHECK(r.out.find(needle) != std::string::npos);
}

}  // namespace hw::test

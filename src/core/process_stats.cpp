#include "headwise/core/process_stats.hpp"

#include <fstream>
#include <string>

namespace hw {

namespace {

// A "Name:  <n> kB" line of /proc/self/status, in bytes (-1: not there).
int64_t status_kb_line(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.compare(0, k.size(), k) == 0) {
      try {
        return int64_t(std::stoll(line.substr(k.size()))) * 1024;
      } catch (const std::exception&) {
        return -1;
      }
    }
  return -1;
}

}  // namespace

int64_t current_rss_bytes() { return status_kb_line("VmRSS"); }
int64_t peak_rss_bytes() { return status_kb_line("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out.is_open()) return false;
  out << "5";
  out.close();
  return !out.fail();
}

}  // namespace hw

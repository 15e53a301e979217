// The file rendezvous (rendezvous.hpp). Arrival files hold one line "world <n> host <name>";
// every file is written atomically (io::write_file_atomic), so a reader sees all of it or none.
#include "headwise/dist/rendezvous.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/dist/nccl_comm.hpp"
#include "headwise/io/files.hpp"

namespace hw::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string arrival_path(const std::string& dir, const std::string& tag, int rank) {
  return (std::filesystem::path(dir) / (tag + ".rank" + std::to_string(rank))).string();
}
std::string failed_path(const std::string& dir, const std::string& tag) {
  return (std::filesystem::path(dir) / (tag + ".failed")).string();
}

// The whole file, or false when it does not exist (yet).
bool read_small(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  out = s.str().substr(0, 4096);
  return true;
}

// Rank 0: waits for every arrival, checks the worlds agree; the reason it cannot go on, or "".
std::string wait_for_arrivals(const LaunchInfo& launch, const std::string& dir, const std::string& tag,
                              double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<bool> arrived(size_t(launch.world), false);
  arrived[0] = true;
  for (;;) {
    int missing = 0;
    for (int r = 1; r < launch.world; ++r) {
      if (arrived[size_t(r)]) continue;
      std::string text;
      if (!read_small(arrival_path(dir, tag, r), text)) {
        ++missing;
        continue;
      }
      int world = -1;
      char host[256] = {};
      if (std::sscanf(text.c_str(), "world %d host %255s", &world, host) != 2)
        return "rank " + std::to_string(r) + "'s arrival file " + arrival_path(dir, tag, r) + " is not one";
      if (world != launch.world)
        return "rank " + std::to_string(r) + " (host " + host + ") says the world has " + std::to_string(world) +
               " ranks, rank 0 says " + std::to_string(launch.world) + " (" + launch.world_var + ")";
      arrived[size_t(r)] = true;
    }
    if (missing == 0) return "";
    if (Clock::now() >= deadline) {
      std::string who;
      int listed = 0;
      for (int r = 1; r < launch.world && listed < 8; ++r)
        if (!arrived[size_t(r)]) who += (listed++ ? ", " : "") + std::to_string(r);
      if (missing > listed) who += " and " + std::to_string(missing - listed) + " more";
      return std::string(missing == 1 ? "rank " : "ranks ") + who + " of " + std::to_string(launch.world) +
             " never arrived in " + dir + " within " + seconds_text(timeout_s) +
             " s (HEADWISE_RENDEZVOUS_TIMEOUT_S): a task that did not start, or a folder the nodes do not share";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

double rendezvous_timeout_s() {
  const char* v = std::getenv("HEADWISE_RENDEZVOUS_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return kNcclIdFileTimeoutS;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  check(end != v && *end == '\0' && s > 0 && s <= 86400,
        std::string("HEADWISE_RENDEZVOUS_TIMEOUT_S='") + v + "' is not a number of seconds in (0, 86400]");
  return s;
}

NcclId rendezvous_through_files(const LaunchInfo& launch, const std::string& dir, const std::string& tag,
                                double timeout_s, const std::function<NcclId()>& make_id) {
  check(!tag.empty() && tag.size() <= 128 && tag.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                                   "0123456789._-") == std::string::npos,
        "rendezvous: launch tag '" + tag.substr(0, 64) + "' may hold only letters, digits, '.', '_' and '-'");
  const std::string who = "rendezvous (rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world) + ")";
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec, who + ": cannot create folder " + dir + ": " + ec.message());
  if (launch.rank == 0) {
    const std::string reason = wait_for_arrivals(launch, dir, tag, timeout_s);
    if (!reason.empty()) {
      io::write_file_atomic(failed_path(dir, tag), reason);
      fail(who + ": " + reason);
    }
    const NcclId id = make_id();
    write_nccl_id_file(dir, id, tag);
    return id;
  }
  io::write_file_atomic(arrival_path(dir, tag, launch.rank),
                        "world " + std::to_string(launch.world) + " host " + host_name() + "\n");
  // The id, or rank 0's reason for giving up. This rank waits twice as long as rank 0 does for
  // arrivals, so when rank 0 gives up its reason arrives first; its own timeout means rank 0 never came.
  const double wait_s = 2 * timeout_s;
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    std::string reason;
    if (read_small(failed_path(dir, tag), reason)) fail(who + ": rank 0 gave up: " + reason);
    if (Clock::now() >= deadline) break;
    try {
      return read_nccl_id_file(dir, tag, 0.0);
    } catch (const Error&) {
      // not there yet (or one of an earlier launch): poll again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fail(who + ": rank 0 wrote no id in " + dir + " within " + seconds_text(wait_s) +
       " s (HEADWISE_RENDEZVOUS_TIMEOUT_S): rank 0 did not start, or the folder is not shared by every node");
}

}  // namespace hw::dist

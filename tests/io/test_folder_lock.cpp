// One writer per output folder (headwise/io/folder_lock.hpp). flock(2) locks belong to an open
// file description, so two FolderLocks in one process conflict exactly as two processes do.
#include <catch2/catch.hpp>

#include <sys/file.h>
#include <unistd.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "io/io_test_files.hpp"

namespace fs = std::filesystem;
using Catch::Contains;
using hw::io::FolderLock;

namespace {
std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

TEST_CASE("folder lock: a second holder is refused, naming the folder and the first holder", "[files][lock]") {
  hw::test::TempDir dir;
  const std::string run = dir.file("run");
  {
    FolderLock a = FolderLock::inside(run, "train");
    REQUIRE(a.held());
    CHECK(fs::is_directory(run));  // created for the lock
    CHECK(a.lock_file() == run + "/.lock");
    const std::string why = refusal([&] { FolderLock::inside(run, "experiment"); });
    CHECK_THAT(why, Contains("'" + run + "' is in use by another headwise process"));
    // The holder's own record: its command, pid, host and start time (year first).
    CHECK_THAT(why, Contains("train, pid " + std::to_string(::getpid()) + " on host " + host() + ", started 20"));
    CHECK_THAT(why, Contains("lock file " + run + "/.lock"));
    hw::io::write_file_atomic(run + "/metrics.jsonl", "{}\n");
  }
  // Released: the lock file is gone, the folder (now holding a file) stays, and it locks again.
  CHECK_FALSE(fs::exists(run + "/.lock"));
  CHECK(fs::exists(run + "/metrics.jsonl"));
  FolderLock again = FolderLock::inside(run, "train");
  CHECK(again.held());
}

TEST_CASE("folder lock: a folder made only for the lock goes with it, and a stale lock file blocks nobody",
          "[files][lock]") {
  hw::test::TempDir dir;
  const std::string run = dir.file("a/b/run");
  { FolderLock a = FolderLock::inside(run, "train"); }
  CHECK_FALSE(fs::exists(run));  // nothing written: no empty folder left behind
  // A lock file left by a killed holder (its flock died with it): no obstacle.
  fs::create_directories(run);
  { std::ofstream(run + "/.lock") << R"({"command":"train","pid":1,"host":"gone","started":"x"})" << "\n"; }
  FolderLock b = FolderLock::inside(run, "train");
  CHECK(b.held());
}

TEST_CASE("folder lock: the beside form locks OUT.lock and leaves OUT alone", "[files][lock]") {
  hw::test::TempDir dir;
  const std::string out = dir.file("conv");
  {
    FolderLock a = FolderLock::beside(out, "convert");
    CHECK(a.lock_file() == out + ".lock");
    CHECK_FALSE(fs::exists(out));
    CHECK_THAT(refusal([&] { FolderLock::beside(out + "/", "convert"); }), Contains("convert, pid"));
  }
  CHECK_FALSE(fs::exists(out + ".lock"));
}

TEST_CASE("folder lock: a holder that moves its folder keeps it, and the old name is free again", "[files][lock]") {
  hw::test::TempDir dir;
  const std::string run = dir.file("run"), aside = dir.file("run.old");
  FolderLock a = FolderLock::inside(run, "train");
  fs::rename(run, aside);
  a.folder_moved(aside);
  // The moved folder's lock is still held (its file moved with it) ...
  CHECK_THAT(refusal([&] { FolderLock::inside(aside, "train"); }), Contains("is in use"));
  // ... and the old name is a new, free folder.
  FolderLock b = FolderLock::inside(run, "train");
  CHECK(b.held());
  a.release();
  CHECK_FALSE(fs::exists(aside + "/.lock"));
  CHECK(fs::exists(run + "/.lock"));  // b's, untouched by a's release
}

TEST_CASE("folder lock: a holder releasing while another opens the file: the other retries and gets it",
          "[files][lock]") {
  hw::test::TempDir dir;
  const std::string run = dir.file("run");
  FolderLock a = FolderLock::inside(run, "train");
  // Another process opened the lock file just before a's release unlinks it: its flock then
  // succeeds on a file no longer at the path. Simulated with a descriptor taken now.
  const int early = ::open((run + "/.lock").c_str(), O_RDWR);
  REQUIRE(early >= 0);
  a.release();
  CHECK(::flock(early, LOCK_EX | LOCK_NB) == 0);  // the unlinked file: worthless
  FolderLock b = FolderLock::inside(run, "train");  // opens the path afresh
  CHECK(b.held());
  CHECK(fs::exists(run + "/.lock"));
  ::close(early);
}

TEST_CASE("folder lock: a planted lock file (link, hard link, garbage record) is refused or quoted safely",
          "[files][lock][hostile]") {
  hw::test::TempDir dir;
  const std::string run = dir.file("run"), victim = dir.file("victim");
  { std::ofstream(victim) << "precious"; }
  fs::create_directories(run);
  fs::create_symlink(victim, run + "/.lock");
  CHECK_THAT(refusal([&] { FolderLock::inside(run, "train"); }), Contains("is a symbolic link"));
  fs::remove(run + "/.lock");
  fs::create_hard_link(victim, run + "/.lock");
  CHECK_THAT(refusal([&] { FolderLock::inside(run, "train"); }), Contains("not a regular file of its own"));
  fs::remove(run + "/.lock");
  CHECK(hw::io::read_file(victim) == "precious");
  // A holder whose record is not JSON: the refusal says so instead of quoting it.
  { std::ofstream(run + "/.lock") << std::string(10000, '[') << "\n"; }
  const int fd = ::open((run + "/.lock").c_str(), O_RDWR);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  CHECK_THAT(refusal([&] { FolderLock::inside(run, "train"); }), Contains("holder unknown"));
  ::close(fd);
}

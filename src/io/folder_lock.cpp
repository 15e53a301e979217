#include "headwise/io/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"

namespace fs = std::filesystem;

namespace hw::io {

namespace {

// Does `path` (not followed) name the file open as `fd`? False once the holder removed it.
bool names_file(const std::string& path, int fd) {
  struct stat a {}, b {};
  return ::lstat(path.c_str(), &a) == 0 && ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm {};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// The holder's record ({"command","pid","host","started"}), written once it holds the lock.
void write_holder(int fd, const std::string& command) {
  const nlohmann::json j = {{"command", command}, {"pid", int64_t(::getpid())}, {"host", host_name()},
                            {"started", utc_now()}};
  const std::string text = j.dump() + "\n";
  if (::ftruncate(fd, 0) != 0) return;  // the record is for messages only: the flock is the lock
  ssize_t off = 0;
  while (off < ssize_t(text.size())) {
    const ssize_t w = ::pwrite(fd, text.data() + off, text.size() - size_t(off), off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += w;
  }
}

// "train, pid 1234 on host n7, started 2026-12-05 10:00:01 UTC" from the holder's record. The
// file may come from anywhere (a shared folder): read a bounded amount, take only well-typed
// fields, quote them briefly. The holder writes the record (one write) right after it gets the
// lock, so an empty file is read again for up to a second.
std::string describe_holder(int fd, const std::string& lock_file) {
  std::string text;
  for (int attempt = 0; attempt < 20; ++attempt) {
    char buf[4096];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    text.assign(buf, n > 0 ? size_t(n) : 0);
    if (!text.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nlohmann::json j;
  try {
    j = parse_json(text, lock_file);
  } catch (const Error&) {
  }
  if (!j.is_object()) return "holder unknown: its lock file holds no record";
  auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? text_brief(j[k].get<std::string>(), 64) : std::string("?");
  };
  const std::string pid = j.contains("pid") && j["pid"].is_number_integer() ? std::to_string(j["pid"].get<int64_t>()) : "?";
  return str("command") + ", pid " + pid + " on host " + str("host") + ", started " + str("started");
}

}  // namespace

FolderLock FolderLock::inside(const std::string& dir, const std::string& command) {
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(dir, ec));
  return acquire(dir, (fs::path(dir) / ".lock").string(), command, !existed);
}

FolderLock FolderLock::beside(const std::string& path, const std::string& command) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.has_filename() == false) p = p.parent_path();  // "out/" -> "out"
  return acquire(path, p.string() + ".lock", command, false);
}

FolderLock FolderLock::acquire(const std::string& folder, const std::string& lock_file, const std::string& command,
                               bool created_folder) {
  const std::string parent = fs::path(lock_file).parent_path().string();
  // A holder that releases removes the file: whoever opened it just before gets a lock on an
  // unlinked file, notices, and opens the path again. Each round needs such a release, so a
  // few rounds are plenty.
  for (int attempt = 0; attempt < 64; ++attempt) {
    if (!parent.empty()) ensure_dir(parent);  // (again each round: a releasing holder may remove a folder it made)
    refuse_symlink(lock_file);
    const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int e = errno;
      if (e == ELOOP) refuse_symlink(lock_file);
      if (e == ENOENT) continue;  // its folder was removed meanwhile
      fail("cannot open the lock file '" + lock_file + "': " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
      ::close(fd);
      fail("'" + lock_file + "' is not a regular file of its own (a link or a device); headwise does not lock through it");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (!names_file(lock_file, fd)) {  // released and removed while we opened it
        ::close(fd);
        continue;
      }
      write_holder(fd, command);
      FolderLock lock;
      lock.folder_ = folder;
      lock.lock_file_ = lock_file;
      lock.fd_ = fd;
      lock.created_folder_ = created_folder;
      return lock;
    }
    const int e = errno;
    if (e == EWOULDBLOCK) {
      if (!names_file(lock_file, fd)) {  // its holder is just letting go
        ::close(fd);
        continue;
      }
      const std::string holder = describe_holder(fd, lock_file);
      ::close(fd);
      fail("'" + folder + "' is in use by another headwise process (" + holder +
           "); one process writes a folder at a time: wait for it, or stop it (lock file " + lock_file + ")");
    }
    ::close(fd);
    if (e == ENOSYS || e == EOPNOTSUPP || e == ENOLCK) {
      spdlog::warn("'{}': this filesystem does not support flock ({}): '{}' is not protected against a second writer",
                   lock_file, std::strerror(e), folder);
      return FolderLock();
    }
    fail("cannot lock '" + lock_file + "': " + std::strerror(e));
  }
  fail("cannot lock '" + lock_file + "': it keeps being replaced by other processes");
}

FolderLock::~FolderLock() { release(); }

FolderLock::FolderLock(FolderLock&& o) noexcept
    : folder_(std::move(o.folder_)), lock_file_(std::move(o.lock_file_)), fd_(o.fd_), created_folder_(o.created_folder_) {
  o.fd_ = -1;
}

FolderLock& FolderLock::operator=(FolderLock&& o) noexcept {
  if (this != &o) {
    release();
    folder_ = std::move(o.folder_);
    lock_file_ = std::move(o.lock_file_);
    fd_ = o.fd_;
    created_folder_ = o.created_folder_;
    o.fd_ = -1;
  }
  return *this;
}

void FolderLock::folder_moved(const std::string& new_dir) {
  folder_ = new_dir;
  lock_file_ = (fs::path(new_dir) / ".lock").string();
  created_folder_ = false;
}

void FolderLock::release() {
  if (fd_ < 0) return;
  // Unlink while still holding it (see the header), then let go.
  if (names_file(lock_file_, fd_)) ::unlink(lock_file_.c_str());
  ::close(fd_);
  fd_ = -1;
  if (created_folder_) ::rmdir(folder_.c_str());  // only if nothing was written into it
}

}  // namespace hw::io

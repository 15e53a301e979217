#include "headwise/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "headwise/core/error.hpp"
#include "io/atomic_file.hpp"

namespace fs = std::filesystem;

namespace hw::io {

namespace {

std::string errno_text() { return std::strerror(errno); }

// fsync the directory holding `path` so the rename itself survives a crash.
void sync_parent_dir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(dfd);
  ::close(dfd);
}

// A suffix no other writer (thread, process) picks at the same moment.
std::string temp_suffix() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  const uint64_t x = (t * 0x9E3779B97F4A7C15ull) ^ (uint64_t(::getpid()) << 32) ^ counter.fetch_add(1);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

bool is_symlink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

void refuse_symlink(const std::string& path) {
  check(!is_symlink(path), "'" + path + "' is a symbolic link; headwise does not write through links");
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  refuse_symlink(path_);
  // O_EXCL: the name must not exist (not even as a dangling link), so nothing planted is opened.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = path_ + ".tmp." + temp_suffix();
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 16)) fail("cannot create a temp file for '" + path_ + "': " + errno_text());
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  check(fd_ >= 0, "write to '" + tmp_ + "' after commit");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    check(w > 0, "cannot write '" + tmp_ + "': " + errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  check(fd_ >= 0, "commit of '" + tmp_ + "' twice");
  if (::fsync(fd_) != 0) fail("cannot fsync '" + tmp_ + "': " + errno_text());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(tmp_.c_str());
    fail("cannot close '" + tmp_ + "': " + errno_text());
  }
  if (is_symlink(path_)) {  // planted while we wrote
    ::unlink(tmp_.c_str());
    refuse_symlink(path_);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp_.c_str());
    fail("cannot rename '" + tmp_ + "' to '" + path_ + "': " + why);
  }
  sync_parent_dir(path_);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile f(path);
  f.write(content.data(), content.size());
  f.commit();
}

void copy_file_atomic(const std::string& from, const std::string& to) { write_file_atomic(to, read_file(from)); }

std::string read_file(const std::string& path) {
  std::error_code ec;
  check(fs::is_regular_file(path, ec), "file '" + path + "' does not exist or is not a regular file");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  check(!in.bad(), "cannot read '" + path + "'");
  return ss.str();
}

void replace_dir_atomic(const std::string& tmp_dir, const std::string& final_dir) {
  std::error_code ec;
  refuse_symlink(tmp_dir);
  refuse_symlink(final_dir);
  check(fs::is_directory(tmp_dir, ec), "directory '" + tmp_dir + "' does not exist");
  const std::string aside = final_dir + ".old";
  const bool had_final = fs::exists(final_dir, ec);
  if (had_final) {
    fs::remove_all(aside, ec);  // a leftover from an interrupted earlier replace
    fs::rename(final_dir, aside, ec);
    check(!ec, "cannot move '" + final_dir + "' aside: " + ec.message());
  }
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) {
    std::string why = ec.message();
    if (had_final) fs::rename(aside, final_dir, ec);  // put the old one back
    fail("cannot rename '" + tmp_dir + "' to '" + final_dir + "': " + why);
  }
  sync_parent_dir(final_dir);
  if (had_final) fs::remove_all(aside, ec);  // the new directory is in place; failure here is harmless
}

void ensure_dir(const std::string& path) {
  refuse_symlink(path);
  std::error_code ec;
  fs::create_directories(path, ec);
  check(!ec, "cannot create directory '" + path + "': " + ec.message());
  refuse_symlink(path);  // (planted meanwhile)
  check(fs::is_directory(path, ec), "'" + path + "' is not a directory");
}

void fresh_dir(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // removes a link itself, never what it points to
  check(!ec, "cannot remove '" + path + "': " + ec.message());
  ensure_dir(path);
}

AppendFile::AppendFile(const std::string& path, bool truncate) : path_(path) {
  // Not O_TRUNC here: what is opened is checked before anything in it changes.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd_ < 0 && errno == ELOOP) refuse_symlink(path);
  check(fd_ >= 0, "cannot open '" + path + "': " + errno_text());
  struct stat st {};
  // A hard link to a file elsewhere is as bad as a symbolic one: a log has one name.
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd_);
    fd_ = -1;
    fail("'" + path + "' is not a regular file of its own (a link or a device); headwise does not write through it");
  }
  if (truncate && ::ftruncate(fd_, 0) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    fd_ = -1;
    fail("cannot truncate '" + path + "': " + why);
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }

AppendFile& AppendFile::operator=(AppendFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void AppendFile::write_line(const std::string& line) {
  check(fd_ >= 0, "internal: write to a closed log");
  const std::string text = line + "\n";
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    check(w > 0, "cannot write '" + path_ + "': " + errno_text());
    p += w;
    n -= size_t(w);
  }
}

}  // namespace hw::io

#include "headwise/io/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd_ >= 0, "cannot create '" + tmp_ + "': " + errno_text());
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

}  // namespace hw::io

#pragma once
// Internal: a file written to a fresh temp name beside <path> ("<path>.tmp.<random>", created
// with O_CREAT | O_EXCL, so never an existing file or a link) and renamed over <path> only once it
// is complete and fsynced, so a crash or an error never leaves a half-written <path>. An existing
// symbolic link at <path> is refused.
#include <cstddef>
#include <string>

namespace hw::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // creates the temp file; throws naming path
  ~AtomicFile();                           // removes the temp file if commit() never ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void commit();  // fsync, close, rename over the final path, fsync the directory

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
};

}  // namespace hw::io

#pragma once
// Small file helpers used by every writer: nothing is ever left half-written, and nothing is
// written through a symbolic link. A run directory may come from elsewhere (resume, a shared
// folder): a link planted at a path headwise writes (metrics.jsonl -> ~/.bashrc, checkpoints ->
// /etc) must not make it write outside the directory, so an existing link at a target path is
// an error, temp files are created exclusively (O_EXCL: never an existing file or link), and
// logs are opened with O_NOFOLLOW. (Links in the parents of a path the user names, such as --out
// itself, are the user's choice and are followed.)
#include <string>

namespace hw::io {

// Write `content` to path via a fresh temp file beside it (created exclusively), fsync, rename.
void write_file_atomic(const std::string& path, const std::string& content);
// write_file_atomic of another file's bytes.
void copy_file_atomic(const std::string& from, const std::string& to);
std::string read_file(const std::string& path);  // throws hw::Error naming the file
// Replace directory `final_dir` by the complete directory `tmp_dir` (rename; an existing
// final_dir is moved aside first and removed after). Neither may be a symbolic link.
void replace_dir_atomic(const std::string& tmp_dir, const std::string& final_dir);
// Directory `path`, created with its missing parents; an existing link or non-directory at path
// is an error.
void ensure_dir(const std::string& path);
// An empty directory at `path`: whatever is there is removed first (a link itself, never what it
// points to), then the directory is created as ensure_dir does.
void fresh_dir(const std::string& path);
// Throws "<path> is a symbolic link; headwise does not write through links" when it is one.
void refuse_symlink(const std::string& path);

// A log written line by line (metrics.jsonl): opened without following a link (a link there is
// an error), it must be a regular file with a single name; `truncate` empties it first, else
// lines are appended. Each line is written whole with one write(2).
class AppendFile {
 public:
  AppendFile() = default;
  AppendFile(const std::string& path, bool truncate);
  ~AppendFile();
  AppendFile(AppendFile&& o) noexcept;
  AppendFile& operator=(AppendFile&& o) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  bool is_open() const { return fd_ >= 0; }
  void write_line(const std::string& line);  // appends line + "\n"

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace hw::io

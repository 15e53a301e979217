#pragma once
// Small file helpers used by every writer: nothing is ever left half-written.
#include <string>

namespace hw::io {

// Write `content` to path via path.tmp + fsync + rename.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws hw::Error naming the file
// Replace directory `final_dir` by the complete directory `tmp_dir` (rename; an existing
// final_dir is moved aside first and removed after).
void replace_dir_atomic(const std::string& tmp_dir, const std::string& final_dir);

}  // namespace hw::io

#pragma once
// Reads a text file in chunks that end at a line start followed by a printable ASCII byte
// (prepare.hpp: where any supported pre-tokenizer cuts anyway), or at the end of the file.
// A chunk is at least target bytes unless the file ends; a line longer than that makes the
// chunk longer (memory is bounded by the longest line, not the file).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace hw::data {

class TextChunks {
 public:
  // cut_at_lines = false: the whole file is one chunk.
  TextChunks(const std::string& path, int64_t target, bool cut_at_lines);
  ~TextChunks();
  // The next chunk into out; false at the end of the file. Throws hw::Error naming the file on
  // a read error.
  bool next(std::string& out);
  int64_t bytes_read() const { return read_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  size_t target_;
  bool cut_;
  bool eof_ = false;
  std::string carry_;  // read past the last cut
  int64_t read_ = 0;
};

}  // namespace hw::data

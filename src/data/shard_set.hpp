#pragma once
// Every shard of a glob, read into memory once. The default corpus (KJV, ~4.4M byte tokens)
// and the experiment corpora fit comfortably in RAM as int32, and in-memory tokens make a
// batch a pure function of its index with no file I/O in the training loop.
#include <cstdint>
#include <string>
#include <vector>

namespace hw::data {

struct ShardSet {
  std::string glob;
  std::vector<std::string> files;
  std::vector<std::vector<int32_t>> tokens;  // one vector per file, in `files` order (16- and 32-bit shards)
  int64_t total_tokens = 0;

  static ShardSet load(const std::string& glob);
};

// Keeps only `part` of the tokens (loader.hpp: Part); total_tokens follows.
enum class Part;
void keep_part(ShardSet& s, Part part);

}  // namespace hw::data

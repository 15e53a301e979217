#pragma once
// Token shards in llm.c's format: a 256 x int32 header (magic 20240520, version 1, token
// count, rest zero) followed by the tokens as uint16.
#include <cstdint>
#include <string>
#include <vector>

namespace hw::data {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;

// Throws hw::Error naming the file on a missing file, bad magic/version or a token count
// that does not match the file size.
std::vector<uint16_t> read_shard(const std::string& path);
int64_t shard_token_count(const std::string& path);  // validates the header only
// The token count of a shard whose first 256 int32 are `header` and whose size is file_size;
// throws hw::Error naming `path` on a bad magic/version or a count that does not match the size.
int64_t shard_header_tokens(const int32_t* header, uint64_t file_size, const std::string& path);
// Atomic (temp file + rename).
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);

// Files matching a glob pattern, sorted; throws hw::Error naming the pattern if none match.
std::vector<std::string> expand_glob(const std::string& pattern);

}  // namespace hw::data

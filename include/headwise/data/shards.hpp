#pragma once
// Token shards in llm.c's format: a 256 x int32 header (magic 20240520, version, token count,
// rest zero) followed by the tokens: version 1 as uint16 (the default), version 2 as uint32 (as
// llm.c writes Llama 3's shards), for vocabularies above 65,536. Token ids are at most 2^31-1.
#include <cstdint>
#include <string>
#include <vector>

namespace hw::data {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;    // uint16 tokens
constexpr int32_t kShardVersion32 = 2;  // uint32 tokens

// Throws hw::Error naming the file on a missing file, bad magic/version or a token count
// that does not match the file size. read_shard reads version 1 only; read_shard_tokens either
// (a uint32 token above 2^31-1 is an error naming it and its position).
std::vector<uint16_t> read_shard(const std::string& path);
std::vector<int32_t> read_shard_tokens(const std::string& path);
int64_t shard_token_count(const std::string& path);  // validates the header only
// The token count of a shard whose first 256 int32 are `header` and whose size is file_size
// (version 1 or 2); throws hw::Error naming `path` on a bad magic/version or a count that does
// not match the size.
int64_t shard_header_tokens(const int32_t* header, uint64_t file_size, const std::string& path);
// Atomic (temp file + rename). write_shard32 writes version 2 (every id at most 2^31-1).
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);
void write_shard32(const std::string& path, const std::vector<uint32_t>& tokens);
// Bytes per token of a shard version (2 or 4); throws for another version.
int shard_token_bytes(int32_t version, const std::string& path);

// Files matching a glob pattern, sorted; throws hw::Error naming the pattern if none match.
std::vector<std::string> expand_glob(const std::string& pattern);

}  // namespace hw::data

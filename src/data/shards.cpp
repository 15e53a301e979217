#include "headwise/data/shards.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "headwise/core/error.hpp"
#include "io/atomic_file.hpp"

namespace hw::data {

namespace {

constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string quoted(const std::string& path) { return "shard '" + path + "'"; }

// Opens the shard and checks header and file size; leaves the stream just past the header.
File open_checked(const std::string& path, int64_t& ntok, int32_t* version = nullptr) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(quoted(path) + ": no such file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(quoted(path) + ": cannot open (" + std::strerror(errno) + ")");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(quoted(path) + ": cannot read size (" + ec.message() + ")");
  std::array<int32_t, kHeaderInts> header{};
  const size_t got = std::fread(header.data(), 1, kHeaderBytes, f.get());
  if (got != kHeaderBytes)
    fail(quoted(path) + ": short header (" + std::to_string(got) + " of " + std::to_string(kHeaderBytes) +
         " bytes)");
  ntok = shard_header_tokens(header.data(), uint64_t(size), path);
  if (version) *version = header[1];
  return f;
}

template <class T>
void write_tokens(const std::string& path, int32_t version, const std::vector<T>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail(quoted(path) + ": " + std::to_string(tokens.size()) + " tokens do not fit the int32 header count");
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());

  // Readers never see a partial shard: a fresh temp file (never a planted link), fsync, rename.
  io::AtomicFile f(path);
  f.write(header.data(), kHeaderBytes);
  f.write(tokens.data(), tokens.size() * sizeof(T));
  f.commit();
}

}  // namespace

int shard_token_bytes(int32_t version, const std::string& path) {
  if (version == kShardVersion) return 2;
  if (version == kShardVersion32) return 4;
  fail(quoted(path) + ": unsupported version " + std::to_string(version) + " (expected " +
       std::to_string(kShardVersion) + " for 16-bit or " + std::to_string(kShardVersion32) + " for 32-bit tokens)");
}

int64_t shard_header_tokens(const int32_t* header, uint64_t file_size, const std::string& path) {
  if (header[0] != kShardMagic)
    fail(quoted(path) + ": bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kShardMagic) +
         ")");
  const int width = shard_token_bytes(header[1], path);
  if (header[2] < 0) fail(quoted(path) + ": negative token count " + std::to_string(header[2]));
  const int64_t ntok = header[2];
  const uint64_t expected = kHeaderBytes + static_cast<uint64_t>(ntok) * static_cast<uint64_t>(width);
  if (file_size != expected)
    fail(quoted(path) + ": header says " + std::to_string(ntok) + " tokens (" + std::to_string(expected) +
         " bytes) but the file has " + std::to_string(file_size) + " bytes");
  return ntok;
}

int64_t shard_token_count(const std::string& path) {
  int64_t ntok = 0;
  open_checked(path, ntok);
  return ntok;
}

std::vector<uint16_t> read_shard(const std::string& path) {
  int64_t ntok = 0;
  int32_t version = 0;
  File f = open_checked(path, ntok, &version);
  if (version != kShardVersion) fail(quoted(path) + ": holds 32-bit tokens (version 2); read it with read_shard_tokens");
  std::vector<uint16_t> tokens(static_cast<size_t>(ntok));
  const size_t got = std::fread(tokens.data(), sizeof(uint16_t), tokens.size(), f.get());
  if (got != tokens.size())
    fail(quoted(path) + ": read " + std::to_string(got) + " of " + std::to_string(ntok) + " tokens");
  return tokens;
}

std::vector<int32_t> read_shard_tokens(const std::string& path) {
  int64_t ntok = 0;
  int32_t version = 0;
  File f = open_checked(path, ntok, &version);
  std::vector<int32_t> tokens(static_cast<size_t>(ntok));
  if (version == kShardVersion) {
    std::vector<uint16_t> narrow(tokens.size());
    const size_t got = std::fread(narrow.data(), sizeof(uint16_t), narrow.size(), f.get());
    if (got != narrow.size())
      fail(quoted(path) + ": read " + std::to_string(got) + " of " + std::to_string(ntok) + " tokens");
    std::copy(narrow.begin(), narrow.end(), tokens.begin());
    return tokens;
  }
  std::vector<uint32_t> wide(tokens.size());
  const size_t got = std::fread(wide.data(), sizeof(uint32_t), wide.size(), f.get());
  if (got != wide.size()) fail(quoted(path) + ": read " + std::to_string(got) + " of " + std::to_string(ntok) + " tokens");
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] > uint32_t(std::numeric_limits<int32_t>::max()))
      fail(quoted(path) + ": token " + std::to_string(wide[i]) + " at position " + std::to_string(i) +
           " is above 2^31-1, the largest token id");
    tokens[i] = int32_t(wide[i]);
  }
  return tokens;
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_tokens(path, kShardVersion, tokens);
}

void write_shard32(const std::string& path, const std::vector<uint32_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] > uint32_t(std::numeric_limits<int32_t>::max()))
      fail(quoted(path) + ": token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
           " is above 2^31-1, the largest token id");
  write_tokens(path, kShardVersion32, tokens);
}

}  // namespace hw::data

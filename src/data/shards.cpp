#include "headwise/data/shards.hpp"

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
File open_checked(const std::string& path, int64_t& ntok) {
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
  return f;
}

}  // namespace

int64_t shard_header_tokens(const int32_t* header, uint64_t file_size, const std::string& path) {
  if (header[0] != kShardMagic)
    fail(quoted(path) + ": bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kShardMagic) +
         ")");
  if (header[1] != kShardVersion)
    fail(quoted(path) + ": unsupported version " + std::to_string(header[1]) + " (expected " +
         std::to_string(kShardVersion) + ")");
  if (header[2] < 0) fail(quoted(path) + ": negative token count " + std::to_string(header[2]));
  const int64_t ntok = header[2];
  const uint64_t expected = kHeaderBytes + static_cast<uint64_t>(ntok) * sizeof(uint16_t);
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
  File f = open_checked(path, ntok);
  std::vector<uint16_t> tokens(static_cast<size_t>(ntok));
  const size_t got = std::fread(tokens.data(), sizeof(uint16_t), tokens.size(), f.get());
  if (got != tokens.size())
    fail(quoted(path) + ": read " + std::to_string(got) + " of " + std::to_string(ntok) + " tokens");
  return tokens;
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail(quoted(path) + ": " + std::to_string(tokens.size()) + " tokens do not fit the int32 header count");
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  // Readers never see a partial shard: a fresh temp file (never a planted link), fsync, rename.
  io::AtomicFile f(path);
  f.write(header.data(), kHeaderBytes);
  f.write(tokens.data(), tokens.size() * sizeof(uint16_t));
  f.commit();
}

}  // namespace hw::data

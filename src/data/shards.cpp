#include "headwise/data/shards.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "headwise/core/error.hpp"

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
  std::array<int32_t, kHeaderInts> header{};
  const size_t got = std::fread(header.data(), 1, kHeaderBytes, f.get());
  if (got != kHeaderBytes)
    fail(quoted(path) + ": short header (" + std::to_string(got) + " of " + std::to_string(kHeaderBytes) +
         " bytes)");
  if (header[0] != kShardMagic)
    fail(quoted(path) + ": bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kShardMagic) +
         ")");
  const int width = shard_token_bytes(header[1], path);
  if (version) *version = header[1];
  if (header[2] < 0) fail(quoted(path) + ": negative token count " + std::to_string(header[2]));
  ntok = header[2];
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(quoted(path) + ": cannot read size (" + ec.message() + ")");
  const uint64_t expected = kHeaderBytes + static_cast<uint64_t>(ntok) * static_cast<uint64_t>(width);
  if (size != expected)
    fail(quoted(path) + ": header says " + std::to_string(ntok) + " tokens (" + std::to_string(expected) +
         " bytes) but the file has " + std::to_string(size) + " bytes");
  return f;
}

// write(2) until everything is written or an error occurs.
bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

template <class T>
void write_tokens(const std::string& path, int32_t version, const std::vector<T>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail(quoted(path) + ": " + std::to_string(tokens.size()) + " tokens do not fit the int32 header count");
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());

  // Readers never see a partial shard: write a private temp file, fsync, then rename over.
  const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(quoted(path) + ": cannot create '" + tmp + "' (" + std::strerror(errno) + ")");
  const bool ok = write_all(fd, header.data(), kHeaderBytes) &&
                  write_all(fd, tokens.data(), tokens.size() * sizeof(T)) && ::fsync(fd) == 0;
  const int err = errno;
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) {
    ::unlink(tmp.c_str());
    fail(quoted(path) + ": write failed (" + std::strerror(ok ? errno : err) + ")");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rerr = errno;
    ::unlink(tmp.c_str());
    fail(quoted(path) + ": cannot rename temp file into place (" + std::strerror(rerr) + ")");
  }
}

}  // namespace

int shard_token_bytes(int32_t version, const std::string& path) {
  if (version == kShardVersion) return 2;
  if (version == kShardVersion32) return 4;
  fail(quoted(path) + ": unsupported version " + std::to_string(version) + " (expected " +
       std::to_string(kShardVersion) + " for 16-bit or " + std::to_string(kShardVersion32) + " for 32-bit tokens)");
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

// Shard format: byte-exact layout, round trip, and one clear error per kind of corruption.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/shards.hpp"

using hw::data::read_shard;
using hw::data::read_shard_tokens;
using hw::data::shard_token_count;
using hw::data::write_shard;
using hw::data::write_shard32;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_int32(std::string& bytes, size_t word, int32_t v) { std::memcpy(&bytes[word * 4], &v, 4); }

// Expects hw::Error whose message names `file` and contains `what`.
void require_error(const std::string& file, const std::string& what, bool header_only) {
  try {
    if (header_only)
      shard_token_count(file);
    else
      read_shard(file);
    FAIL("no error for " << what);
  } catch (const hw::Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find(file) != std::string::npos);
    CHECK(msg.find(what) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("shard bytes follow llm.c's layout and round-trip") {
  hw::test::TempDir dir;
  const std::string f = dir.file("a.bin");
  const std::vector<uint16_t> toks = {0, 1, 255, 256, 65535, 12345, 7};
  write_shard(f, toks);

  // Independent check of the layout, byte by byte (little-endian host).
  const std::string bytes = slurp(f);
  REQUIRE(bytes.size() == 1024 + 2 * toks.size());
  int32_t h[256];
  std::memcpy(h, bytes.data(), 1024);
  CHECK(h[0] == 20240520);
  CHECK(h[1] == 1);
  CHECK(h[2] == 7);
  for (int i = 3; i < 256; ++i) CHECK(h[i] == 0);
  CHECK(static_cast<unsigned char>(bytes[1024 + 2 * 4]) == 0xFF);  // 65535 low byte
  CHECK(static_cast<unsigned char>(bytes[1024 + 2 * 3 + 1]) == 0x01);  // 256 high byte

  CHECK(read_shard(f) == toks);
  CHECK(shard_token_count(f) == 7);
  // No temp file left behind.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) n += e.is_regular_file() ? 1 : 0;
  CHECK(n == 1);
}

TEST_CASE("empty shard round-trips and overwriting replaces the file") {
  hw::test::TempDir dir;
  const std::string f = dir.file("e.bin");
  write_shard(f, {});
  CHECK(read_shard(f).empty());
  write_shard(f, {4, 5});
  CHECK(read_shard(f) == std::vector<uint16_t>{4, 5});
}

TEST_CASE("corrupt shards give an hw::Error naming the file and the problem") {
  hw::test::TempDir dir;
  const std::string good = dir.file("good.bin");
  write_shard(good, {1, 2, 3, 4});
  const std::string bytes = slurp(good);

  for (bool header_only : {false, true}) {
    SECTION(header_only ? "header validation" : "full read") {
      require_error(dir.file("missing.bin"), "no such file", header_only);

      const std::string shorth = dir.file("short_header.bin");
      hw::test::write_text(shorth, bytes.substr(0, 100));
      require_error(shorth, "short header", header_only);

      const std::string trunc = dir.file("truncated.bin");
      hw::test::write_text(trunc, bytes.substr(0, bytes.size() - 1));
      require_error(trunc, "header says 4 tokens", header_only);

      std::string b = bytes;
      put_int32(b, 0, 20240521);
      const std::string magic = dir.file("magic.bin");
      hw::test::write_text(magic, b);
      require_error(magic, "bad magic", header_only);

      b = bytes;
      put_int32(b, 1, 3);
      const std::string version = dir.file("version.bin");
      hw::test::write_text(version, b);
      require_error(version, "version", header_only);

      b = bytes;
      put_int32(b, 2, 5);
      const std::string count = dir.file("count.bin");
      hw::test::write_text(count, b);
      require_error(count, "header says 5 tokens", header_only);

      const std::string longer = dir.file("long.bin");
      hw::test::write_text(longer, bytes + "xy");
      require_error(longer, "header says 4 tokens", header_only);
    }
  }
}

TEST_CASE("32-bit shards: llm.c's version 2 layout, round trip, and 16-bit shards read the same way") {
  hw::test::TempDir dir;
  const std::string f = dir.file("w.bin");
  const std::vector<uint32_t> toks = {0, 65535, 65536, 151935, 2147483647u, 7};
  write_shard32(f, toks);
  const std::string bytes = slurp(f);
  REQUIRE(bytes.size() == 1024 + 4 * toks.size());
  int32_t h[3];
  std::memcpy(h, bytes.data(), 12);
  CHECK(h[0] == 20240520);
  CHECK(h[1] == 2);
  CHECK(h[2] == 6);
  // 65536 = 0x00010000 little-endian at token 2; 151935 = 0x0002517F at token 3.
  CHECK(bytes.substr(1024 + 8, 4) == std::string("\x00\x00\x01\x00", 4));
  CHECK(bytes.substr(1024 + 12, 4) == std::string("\x7F\x51\x02\x00", 4));
  CHECK(read_shard_tokens(f) == std::vector<int32_t>{0, 65535, 65536, 151935, 2147483647, 7});
  CHECK(shard_token_count(f) == 6);
  require_error(f, "32-bit tokens", /*header_only=*/false);  // read_shard is 16-bit only
  // A 16-bit shard through the same reader.
  const std::string g = dir.file("n.bin");
  write_shard(g, {3, 65535});
  CHECK(read_shard_tokens(g) == std::vector<int32_t>{3, 65535});
  // Ids above 2^31-1 are refused on write and on read.
  CHECK_THROWS_WITH(write_shard32(dir.file("big.bin"), {1, 2147483648u}),
                    Catch::Contains("2147483648") && Catch::Contains("position 1"));
  std::string b = bytes;
  const uint32_t big = 4000000000u;
  std::memcpy(&b[1024 + 4 * 5], &big, 4);
  hw::test::write_text(dir.file("bad.bin"), b);
  CHECK_THROWS_WITH(read_shard_tokens(dir.file("bad.bin")), Catch::Contains("token 4000000000 at position 5"));
}

TEST_CASE("write_shard into a missing directory fails naming the shard") {
  hw::test::TempDir dir;
  const std::string f = dir.file("nodir/x.bin");
  try {
    write_shard(f, {1});
    FAIL("no error");
  } catch (const hw::Error& e) {
    CHECK(std::string(e.what()).find(f) != std::string::npos);
  }
}

TEST_CASE("expand_glob sorts matches and names the pattern when nothing matches") {
  hw::test::TempDir dir;
  for (const char* n : {"train_000002.bin", "train_000000.bin", "train_000010.bin", "val_000000.bin"})
    write_shard(dir.file(n), {1});
  const auto files = hw::data::expand_glob(dir.file("train_*.bin"));
  REQUIRE(files.size() == 3);
  CHECK(files[0] == dir.file("train_000000.bin"));
  CHECK(files[1] == dir.file("train_000002.bin"));
  CHECK(files[2] == dir.file("train_000010.bin"));

  const std::string pat = dir.file("test_*.bin");
  try {
    hw::data::expand_glob(pat);
    FAIL("no error");
  } catch (const hw::Error& e) {
    CHECK(std::string(e.what()).find(pat) != std::string::npos);
  }
}

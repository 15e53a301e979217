// Byte tokenizer and `prepare`: split sizes and shard contents checked by hand-computed counts.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/temp_dir.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/data/tokenizer.hpp"

using namespace hw::data;

TEST_CASE("byte tokenizer maps UTF-8 bytes to 0..255 and back") {
  const std::string text = "A\xC3\xA9 \xF0\x9F\x99\x82\n";  // "Aé 🙂\n"
  const std::vector<uint16_t> expected = {65, 0xC3, 0xA9, 32, 0xF0, 0x9F, 0x99, 0x82, 10};
  CHECK(encode_bytes(text) == expected);
  CHECK(decode_bytes(expected) == text);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  CHECK(decode_bytes(encode_bytes(all)) == all);
  CHECK(encode_bytes(all)[255] == 255);
  CHECK_THROWS_AS(decode_bytes({65, 256}), hw::Error);
}

TEST_CASE("prepare joins files with a newline and splits the tail into val shards") {
  hw::test::TempDir dir;
  hw::test::write_text(dir.file("a.txt"), "abc");
  hw::test::write_text(dir.file("b.txt"), "defg\xC3\xA9");  // 6 bytes
  const std::string out = dir.file("out/nested");
  // "abc\ndefg\xC3\xA9" = 10 tokens; val = floor(10 * 0.25) = 2; train = 8 in shards of 3,3,2.
  const std::string summary = prepare_text_shards({dir.file("a.txt"), dir.file("b.txt")}, out, 0.25, 3);
  INFO(summary);
  CHECK(summary.find("train 8 tokens in 3 shard") != std::string::npos);
  CHECK(summary.find("val 2 tokens in 1 shard") != std::string::npos);

  const auto train = expand_glob(out + "/train_*.bin");
  const auto val = expand_glob(out + "/val_*.bin");
  REQUIRE(train.size() == 3);
  REQUIRE(val.size() == 1);
  CHECK(train[0] == out + "/train_000000.bin");
  CHECK(train[2] == out + "/train_000002.bin");
  CHECK(val[0] == out + "/val_000000.bin");
  CHECK(read_shard(train[0]) == std::vector<uint16_t>{'a', 'b', 'c'});
  CHECK(read_shard(train[1]) == std::vector<uint16_t>{'\n', 'd', 'e'});
  CHECK(read_shard(train[2]) == std::vector<uint16_t>{'f', 'g'});
  CHECK(read_shard(val[0]) == std::vector<uint16_t>{0xC3, 0xA9});

  // A second run into the same directory would mix datasets: refused.
  CHECK_THROWS_AS(prepare_text_shards({dir.file("a.txt")}, out, 0.0, 3), hw::Error);
}

TEST_CASE("prepare keeps val non-empty for tiny fractions and writes none at zero") {
  hw::test::TempDir dir;
  hw::test::write_text(dir.file("a.txt"), "hello world");  // 11 bytes
  prepare_text_shards({dir.file("a.txt")}, dir.file("tiny"), 0.001, 100);
  CHECK(shard_token_count(dir.file("tiny/val_000000.bin")) == 1);
  CHECK(shard_token_count(dir.file("tiny/train_000000.bin")) == 10);

  prepare_text_shards({dir.file("a.txt")}, dir.file("none"), 0.0, 100);
  CHECK(shard_token_count(dir.file("none/train_000000.bin")) == 11);
  CHECK_FALSE(std::filesystem::exists(dir.file("none/val_000000.bin")));
}

TEST_CASE("prepare errors name the culprit") {
  hw::test::TempDir dir;
  hw::test::write_text(dir.file("a.txt"), "hello");
  const std::string missing = dir.file("missing.txt");
  try {
    prepare_text_shards({dir.file("a.txt"), missing}, dir.file("o1"), 0.1, 100);
    FAIL("no error");
  } catch (const hw::Error& e) {
    CHECK(std::string(e.what()).find(missing) != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("o1")));  // nothing written before inputs are read
  CHECK_THROWS_AS(prepare_text_shards({dir.file("a.txt")}, dir.file("o2"), 1.0, 100), hw::Error);
  CHECK_THROWS_AS(prepare_text_shards({dir.file("a.txt")}, dir.file("o3"), 0.1, 0), hw::Error);
  hw::test::write_text(dir.file("one.txt"), "x");  // 1 byte cannot feed both splits
  CHECK_THROWS_AS(prepare_text_shards({dir.file("one.txt")}, dir.file("o4"), 0.5, 100), hw::Error);
}

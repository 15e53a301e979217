// Damaged or mismatched files must throw hw::Error naming the file or tensor, never crash.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/io/safetensors.hpp"
#include "io/io_test_files.hpp"

using Catch::Contains;
using hw::DType;
using hw::io::SafetensorsReader;
using hw::test::le64;
using hw::test::write_bytes;

namespace {

// A file from a literal header and `data_bytes` zero bytes of data.
std::string make_file(const hw::test::TempDir& dir, const std::string& header, size_t data_bytes,
                      const std::string& name = "bad.safetensors") {
  const std::string path = dir.file(name);
  write_bytes(path, le64(header.size()) + header + std::string(data_bytes, '\0'));
  return path;
}

const char* kGood = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

}  // namespace

TEST_CASE("safetensors reader: a missing file is named", "[safetensors]") {
  hw::test::TempDir dir;
  CHECK_THROWS_WITH(SafetensorsReader(dir.file("absent.safetensors")),
                    Contains("absent.safetensors") && Contains("does not exist"));
}

TEST_CASE("safetensors reader: truncated files", "[safetensors]") {
  hw::test::TempDir dir;
  SECTION("shorter than the length field") {
    const std::string path = dir.file("short.safetensors");
    write_bytes(path, std::string(5, '\0'));
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains("short.safetensors") && Contains("too short"));
  }
  SECTION("data section cut off") {
    const std::string path = make_file(dir, kGood, 10, "cut.safetensors");
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains("cut.safetensors") && Contains("'w'"));
  }
  SECTION("header cut off") {
    const std::string path = dir.file("cuthead.safetensors");
    write_bytes(path, le64(std::string(kGood).size()) + std::string(kGood).substr(0, 20));
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains("cuthead.safetensors") && Contains("exceeds the file size"));
  }
}

TEST_CASE("safetensors reader: header length larger than the file", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("hl.safetensors");
  write_bytes(path, le64(1000) + std::string(kGood));
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("hl.safetensors") && Contains("header length 1000"));
  write_bytes(path, le64(~0ull) + std::string(kGood));
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("hl.safetensors") && Contains("header length"));
}

TEST_CASE("safetensors reader: bad JSON and bad header structure", "[safetensors]") {
  hw::test::TempDir dir;
  auto fails_with = [&](const std::string& header, size_t data, const std::string& what) {
    const std::string path = make_file(dir, header, data);
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains("bad.safetensors") && Contains(what));
  };
  fails_with(R"({"w":{"dtype":"F32",)", 16, "not valid JSON");
  fails_with(R"([1, 2, 3])", 0, "not a JSON object");
  fails_with(R"({"w":{"dtype":"Q8","shape":[4],"data_offsets":[0,4]}})", 4, "unsupported dtype 'Q8'");
  fails_with(R"({"w":{"shape":[4],"data_offsets":[0,16]}})", 16, "'w' has no dtype");
  fails_with(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,16]}})", 16, "'w'");
  fails_with(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", 16, "'w'");
  fails_with(R"({"w":{"dtype":"F32","shape":[4]}})", 16, "'w' needs data_offsets");
  fails_with(R"({"w":7})", 0, "'w' entry is not an object");
  fails_with(R"({"__metadata__":{"k":3}})", 0, "__metadata__ value 'k'");
  fails_with(R"({"__metadata__":[1]})", 0, "__metadata__ is not an object");
}

TEST_CASE("safetensors reader: offsets out of range, size mismatch and overlap", "[safetensors]") {
  hw::test::TempDir dir;
  auto fails_with = [&](const std::string& header, size_t data, const std::string& what) {
    const std::string path = make_file(dir, header, data);
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains("bad.safetensors") && Contains(what));
  };
  fails_with(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})", 16, "'w' data_offsets [16, 32]");
  fails_with(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,0]}})", 16, "'w' data_offsets [8, 0]");
  fails_with(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16, "'w' holds 12 bytes");
  fails_with(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,16]}})", 16, "'w' holds 16 bytes");
  fails_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
             16, "overlap");
  fails_with(R"({"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,16]}})", 16, "overflows");
}

TEST_CASE("safetensors reader: read() names tensor, expected and got", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = make_file(dir, kGood, 16, "ok.safetensors");
  SafetensorsReader r(path);
  float buf[4];
  CHECK_NOTHROW(r.read("w", DType::F32, {2, 2}, buf));
  CHECK_THROWS_WITH(r.read("missing", DType::F32, {2, 2}, buf), Contains("ok.safetensors") && Contains("'missing'"));
  CHECK_THROWS_WITH(r.info("missing"), Contains("'missing'"));
  CHECK_THROWS_WITH(r.read("w", DType::BF16, {2, 2}, buf),
                    Contains("'w'") && Contains("expected dtype BF16") && Contains("got F32"));
  CHECK_THROWS_WITH(r.read("w", DType::F32, {4}, buf),
                    Contains("'w'") && Contains("expected shape [4]") && Contains("got [2, 2]"));
  CHECK_THROWS_AS(r.read("w", DType::F32, {2, 2, 1}, buf), hw::Error);
}

TEST_CASE("safetensors reader: I64 tensors are validated but not loadable, F16 loads", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  SafetensorsReader r(make_file(dir, header, 16, "mixed.safetensors"));
  CHECK(r.names() == std::vector<std::string>{"h", "w"});
  CHECK(r.info("h").dtype == DType::F16);
  CHECK_THROWS_WITH(r.info("i"), Contains("mixed.safetensors") && Contains("'i'"));
  // Their sizes are still checked with the right element size.
  const std::string bad = R"({"d":{"dtype":"I64","shape":[1],"data_offsets":[0,4]}})";
  CHECK_THROWS_WITH(SafetensorsReader(make_file(dir, bad, 4)), Contains("'d' holds 4 bytes"));
}

// Bit patterns worked by hand: F16 0x3C00 = 1, 0xC000 = -2, 0x0001 = 2^-24 (the smallest
// subnormal), 0x7BFF = 65504 (the largest finite), 0x7C00 = inf; BF16 0x3F80 = 1,
// 0x4049 = 3.140625, 0xC2F7 = -123.5; F64 0.1 rounds to float 0.1f.
TEST_CASE("safetensors reader: read_f32 widens F16, BF16 and F64", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[10,16]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},)"
      R"("i":{"dtype":"I32","shape":[1],"data_offsets":[24,28]}})";
  std::string data;
  for (uint16_t v : {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00, 0x3F80, 0x4049, 0xC2F7})
    data += std::string{char(v & 0xff), char(v >> 8)};
  const double tenth = 0.1;
  data += std::string(reinterpret_cast<const char*>(&tenth), 8) + std::string(4, '\0');
  const std::string path = dir.file("widen.safetensors");
  write_bytes(path, le64(header.size()) + header + data);
  SafetensorsReader r(path);
  float h[5], b[3], d = 0;
  r.read_f32("h", {5}, h);
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 5.9604644775390625e-8f);
  CHECK(h[3] == 65504.0f);
  CHECK(std::isinf(h[4]));
  r.read_f32("b", {3}, b);
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == 3.140625f);
  CHECK(b[2] == -123.5f);
  r.read_f32("d", {1}, &d);
  CHECK(d == 0.1f);
  CHECK_THROWS_WITH(r.read_f32("i", {1}, &d), Contains("'i'") && Contains("not a float type"));
  CHECK_THROWS_WITH(r.read_f32("b", {4}, b), Contains("'b'") && Contains("expected shape [4]"));
}

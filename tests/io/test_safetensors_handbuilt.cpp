// Independent checks of the reader: bytes laid out by hand from the format description, and a
// file written by the Hugging Face safetensors library (the committed GPT-2 fixture).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "headwise/core/error.hpp"
#include "headwise/io/safetensors.hpp"
#include "io/io_test_files.hpp"

using hw::DType;
using hw::io::SafetensorsReader;

TEST_CASE("safetensors reader parses hand-built bytes", "[safetensors]") {
  hw::test::TempDir dir;
  // Header JSON keys in non-sorted order, metadata last, trailing spaces as HF pads.
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"( "b":{"dtype":"I32","shape":[1],"data_offsets":[16,20]},)"
      R"( "__metadata__":{"format":"pt"}}   )";
  const float w[4] = {0.5f, -1.0f, 3.25f, 1e-3f};
  const int32_t b = -12345;
  std::string bytes = hw::test::le64(header.size()) + header;
  bytes.append(reinterpret_cast<const char*>(w), sizeof(w));
  bytes.append(reinterpret_cast<const char*>(&b), sizeof(b));
  const std::string path = dir.file("hand.safetensors");
  hw::test::write_bytes(path, bytes);

  SafetensorsReader r(path);
  CHECK(r.metadata().size() == 1);
  CHECK(r.metadata().at("format") == "pt");
  CHECK(r.names() == std::vector<std::string>{"b", "w"});
  float wb[4];
  r.read("w", DType::F32, {2, 2}, wb);
  CHECK(wb[0] == 0.5f);
  CHECK(wb[1] == -1.0f);
  CHECK(wb[2] == 3.25f);
  CHECK(wb[3] == 1e-3f);
  int32_t bb = 0;
  r.read("b", DType::I32, {1}, &bb);
  CHECK(bb == -12345);
}

// One file per dtype the round trip alone covered (BF16, U16, F64): the data bytes written out
// one by one, little-endian as the format defines, from values worked out by hand (not from
// host memory), so neither our writer nor the host's byte order stands in for the format.
TEST_CASE("safetensors reader parses hand-built BF16, U16 and F64 tensors", "[safetensors]") {
  hw::test::TempDir dir;
  auto file = [&](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& data) {
    const std::string header = R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":[0,)" +
                               std::to_string(data.size()) + "]}}";
    const std::string path = dir.file(name);
    hw::test::write_bytes(path, hw::test::le64(header.size()) + header + data);
    return path;
  };
  {  // bf16 1.0 = 0x3f80, -2.5 = 0xc020, +inf = 0x7f80, 2^-133 (subnormal) = 0x0001; shape [2, 2]
    const std::string data("\x80\x3f" "\x20\xc0" "\x80\x7f" "\x01\x00", 8);
    SafetensorsReader r(file("bf16.safetensors", "BF16", "[2,2]", data));
    CHECK(r.info("t").dtype == DType::BF16);
    CHECK(r.info("t").nbytes == 8);
    uint16_t v[4] = {};
    r.read("t", DType::BF16, {2, 2}, v);
    CHECK(v[0] == 0x3f80);
    CHECK(v[1] == 0xc020);
    CHECK(v[2] == 0x7f80);
    CHECK(v[3] == 0x0001);
    CHECK_THROWS_AS(r.read("t", DType::U16, {2, 2}, v), hw::Error);  // same size, other dtype
  }
  {  // u16 0, 1, 258 = 0x0102, 65535; shape [4]
    const std::string data("\x00\x00" "\x01\x00" "\x02\x01" "\xff\xff", 8);
    SafetensorsReader r(file("u16.safetensors", "U16", "[4]", data));
    CHECK(r.info("t").dtype == DType::U16);
    uint16_t v[4] = {};
    r.read("t", DType::U16, {4}, v);
    CHECK(v[0] == 0);
    CHECK(v[1] == 1);
    CHECK(v[2] == 258);
    CHECK(v[3] == 65535);
  }
  {  // f64 1.0 = 0x3ff0000000000000, -0.375 = 0xbfd8000000000000, 2^-1074 = 0x0000000000000001; shape [3, 1]
    const std::string data("\x00\x00\x00\x00\x00\x00\xf0\x3f"
                           "\x00\x00\x00\x00\x00\x00\xd8\xbf"
                           "\x01\x00\x00\x00\x00\x00\x00\x00",
                           24);
    SafetensorsReader r(file("f64.safetensors", "F64", "[3,1]", data));
    CHECK(r.info("t").dtype == DType::F64);
    CHECK(r.info("t").numel() == 3);
    double v[3] = {};
    r.read("t", DType::F64, {3, 1}, v);
    CHECK(v[0] == 1.0);
    CHECK(v[1] == -0.375);
    CHECK(v[2] == std::ldexp(1.0, -1074));
  }
}

TEST_CASE("safetensors reader reads the file written by the HF safetensors library", "[safetensors]") {
  const std::string fdir = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/hf_tiny_gpt2/";
  std::ifstream in(fdir + "expected.json");
  REQUIRE(in.good());
  const nlohmann::json expected = nlohmann::json::parse(in);
  const auto& checks = expected.at("tensor_checks");
  REQUIRE(checks.size() > 0);

  SafetensorsReader r(fdir + "model.safetensors");
  CHECK(r.names().size() == checks.size());
  for (auto it = checks.begin(); it != checks.end(); ++it) {
    INFO("tensor " << it.key());
    const auto shape = it.value().at("shape").get<std::vector<int64_t>>();
    const auto& info = r.info(it.key());
    CHECK(info.shape == shape);
    std::vector<float> v(static_cast<size_t>(info.numel()));
    r.read(it.key(), DType::F32, shape, v.data());
    // First values bit-exact; the float64 sum as torch computed it.
    const auto first = it.value().at("first").get<std::vector<float>>();
    for (size_t i = 0; i < first.size(); ++i) CHECK(v[i] == first[i]);
    double sum = 0;
    for (float x : v) sum += x;
    CHECK(sum == Approx(it.value().at("sum").get<double>()).epsilon(1e-12).margin(1e-12));
  }
}

// The mapped reader's pieces (issue 55): element ranges of a float tensor widened from each
// dtype, and a tensor's stored bytes streamed as they are, against bytes laid out by hand.
TEST_CASE("safetensors reader reads element ranges and streams stored bytes", "[safetensors]") {
  hw::test::TempDir dir;
  // bf16 [5]: 1.0, -2.5, 0.5, 3.0, -0.125 (0x3f80, 0xc020, 0x3f00, 0x4040, 0xbe00); then f16
  // [3]: 1.0, -2.0, 0.5 (0x3c00, 0xc000, 0x3800).
  const std::string bf("\x80\x3f" "\x20\xc0" "\x00\x3f" "\x40\x40" "\x00\xbe", 10);
  const std::string h("\x00\x3c" "\x00\xc0" "\x00\x38", 6);
  const std::string header = R"({"a":{"dtype":"BF16","shape":[5],"data_offsets":[0,10]},)"
                             R"("b":{"dtype":"F16","shape":[3],"data_offsets":[10,16]}})";
  const std::string path = dir.file("ranges.safetensors");
  hw::test::write_bytes(path, hw::test::le64(header.size()) + header + bf + h);
  SafetensorsReader r(path);
  float v[3] = {};
  r.read_f32_range("a", 1, 3, v);
  CHECK(v[0] == -2.5f);
  CHECK(v[1] == 0.5f);
  CHECK(v[2] == 3.0f);
  r.read_f32_range("b", 2, 1, v);
  CHECK(v[0] == 0.5f);
  CHECK_THROWS_WITH(r.read_f32_range("a", 3, 3, v), Catch::Contains("outside its 5"));
  std::string streamed;
  r.stream("a", [&](const void* p, size_t n) { streamed.append(static_cast<const char*>(p), n); });
  CHECK(streamed == bf);
  streamed.clear();
  r.stream("b", [&](const void* p, size_t n) { streamed.append(static_cast<const char*>(p), n); });
  CHECK(streamed == h);
}

// A streamed tensor is written from its producer, in pieces; a producer that hands over fewer or
// more bytes than its dtype and shape hold is an error, and nothing is left at the path.
TEST_CASE("safetensors writer streams tensors from producers and refuses a wrong byte count", "[safetensors]") {
  hw::test::TempDir dir;
  const float w[6] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  {
    hw::io::SafetensorsWriter wr;
    wr.add_stream("w", DType::F32, {2, 3}, [&](const hw::io::ByteSink& sink) {
      sink(w, 8);  // two pieces of any size
      sink(reinterpret_cast<const char*>(w) + 8, 16);
    });
    const int32_t b = 7;
    wr.add("b", DType::I32, {1}, &b);
    wr.write(dir.file("ok.safetensors"));
  }
  SafetensorsReader r(dir.file("ok.safetensors"));
  float back[6] = {};
  r.read("w", DType::F32, {2, 3}, back);
  CHECK(std::memcmp(back, w, sizeof w) == 0);
  for (size_t short_by : {4, 0}) {
    hw::io::SafetensorsWriter wr;
    wr.add_stream("w", DType::F32, {2, 3}, [&](const hw::io::ByteSink& sink) {
      sink(w, sizeof w - short_by);
      if (short_by == 0) sink(w, 4);  // one value too many
    });
    const std::string bad = dir.file("bad.safetensors");
    CHECK_THROWS_WITH(wr.write(bad), Catch::Contains("tensor 'w' produced"));
    CHECK_FALSE(std::filesystem::exists(bad));
  }
}

// Writer -> reader round trips: every dtype, metadata, zero-size tensors, file layout. A round
// trip alone cannot tell a writer and reader that agree on a wrong format; the reader of every
// dtype is checked on hand-built bytes in test_safetensors_handbuilt.cpp (F32, I32; BF16, U16,
// F64), and on the HF library's own file there too.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "io/io_test_files.hpp"

using hw::DType;
using hw::io::SafetensorsReader;
using hw::io::SafetensorsWriter;

TEST_CASE("safetensors round trip keeps values, dtypes, shapes and metadata", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("rt.safetensors");

  std::vector<float> f32 = {1.5f, -2.25f, 3.0e-8f, 1.0e30f, -0.0f, 7.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80};  // 1.0, -2.0, +inf
  std::vector<int32_t> i32 = {-7, 0, 2147483647, -2147483647 - 1};
  std::vector<uint16_t> u16 = {0, 1, 65535};
  std::vector<double> f64 = {1.0 / 3.0, -1e300};

  SafetensorsWriter w;
  w.add("layer.weight", DType::F32, {2, 3}, f32.data());
  w.add("b16", DType::BF16, {3}, bf16.data());
  w.add("ids", DType::I32, {2, 1, 2}, i32.data());
  w.add("tok", DType::U16, {3}, u16.data());
  w.add("dbl", DType::F64, {2}, f64.data());
  w.add("empty", DType::F32, {0, 5}, nullptr);
  w.add("scalar", DType::F32, {}, f32.data() + 5);
  w.set_metadata("format", "pt");
  w.set_metadata("step", "42");
  w.write(path);
  REQUIRE_FALSE(std::filesystem::exists(path + ".tmp"));

  SafetensorsReader r(path);
  CHECK(r.names() == std::vector<std::string>{"b16", "dbl", "empty", "ids", "layer.weight", "scalar", "tok"});
  CHECK(r.metadata().at("format") == "pt");
  CHECK(r.metadata().at("step") == "42");

  std::vector<float> f32_back(6);
  r.read("layer.weight", DType::F32, {2, 3}, f32_back.data());
  CHECK(std::memcmp(f32_back.data(), f32.data(), 6 * sizeof(float)) == 0);  // bitwise, incl. -0.0
  std::vector<uint16_t> bf16_back(3);
  r.read("b16", DType::BF16, {3}, bf16_back.data());
  CHECK(bf16_back == bf16);
  std::vector<int32_t> i32_back(4);
  r.read("ids", DType::I32, {2, 1, 2}, i32_back.data());
  CHECK(i32_back == i32);
  std::vector<uint16_t> u16_back(3);
  r.read("tok", DType::U16, {3}, u16_back.data());
  CHECK(u16_back == u16);
  std::vector<double> f64_back(2);
  r.read("dbl", DType::F64, {2}, f64_back.data());
  CHECK(f64_back == f64);
  r.read("empty", DType::F32, {0, 5}, nullptr);
  float s = 0;
  r.read("scalar", DType::F32, {}, &s);
  CHECK(s == 7.0f);

  const auto& info = r.info("ids");
  CHECK(info.dtype == DType::I32);
  CHECK(info.numel() == 4);
  CHECK(info.nbytes == 16);
  CHECK(r.info("empty").nbytes == 0);
  CHECK(r.has("tok"));
  CHECK_FALSE(r.has("nope"));
}

TEST_CASE("safetensors writer lays data out contiguously in insertion order after an aligned header",
          "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  std::vector<float> a = {1, 2, 3};
  std::vector<uint16_t> b = {9};
  std::vector<float> c = {4, 5};
  SafetensorsWriter w;
  w.add("zeta", DType::F32, {3}, a.data());  // names deliberately not in sorted order
  w.add("alpha", DType::BF16, {1}, b.data());
  w.add("mid", DType::F32, {2}, c.data());
  w.write(path);

  const std::string bytes = hw::io::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + 12 + 2 + 8);
  const std::string header = bytes.substr(8, n);
  CHECK(header.find_first_not_of(' ', header.rfind('}') + 1) == std::string::npos);  // space padding
  CHECK(header.find("zeta") < header.find("alpha"));

  SafetensorsReader r(path);
  CHECK(r.info("zeta").offset == 0);
  CHECK(r.info("alpha").offset == 12);
  CHECK(r.info("mid").offset == 14);
  // The data section holds the raw bytes in insertion order.
  const char* data = bytes.data() + 8 + n;
  CHECK(std::memcmp(data, a.data(), 12) == 0);
  CHECK(std::memcmp(data + 12, b.data(), 2) == 0);
  CHECK(std::memcmp(data + 14, c.data(), 8) == 0);
}

TEST_CASE("safetensors writer rejects duplicate and reserved names", "[safetensors]") {
  float x = 1;
  SafetensorsWriter w;
  w.add("x", DType::F32, {1}, &x);
  CHECK_THROWS_AS(w.add("x", DType::F32, {1}, &x), hw::Error);
  CHECK_THROWS_AS(w.add("__metadata__", DType::F32, {1}, &x), hw::Error);
  CHECK_THROWS_AS(w.add("neg", DType::F32, {-1}, &x), hw::Error);
}

TEST_CASE("safetensors writer replaces an existing file and leaves no temp file", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("over.safetensors");
  float one = 1, two = 2;
  SafetensorsWriter w1;
  w1.add("v", DType::F32, {1}, &one);
  w1.write(path);
  SafetensorsWriter w2;
  w2.add("v", DType::F32, {1}, &two);
  w2.write(path);
  float back = 0;
  SafetensorsReader(path).read("v", DType::F32, {1}, &back);
  CHECK(back == 2.0f);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("safetensors writer into a missing directory throws naming the path", "[safetensors]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("no/such/dir/x.safetensors");
  float x = 1;
  SafetensorsWriter w;
  w.add("x", DType::F32, {1}, &x);
  CHECK_THROWS_WITH(w.write(path), Catch::Contains("no/such/dir/x.safetensors"));
}

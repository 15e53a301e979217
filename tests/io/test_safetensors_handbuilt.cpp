// Independent checks of the reader: bytes laid out by hand from the format description, and a
// file written by the Hugging Face safetensors library (the committed GPT-2 fixture).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

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

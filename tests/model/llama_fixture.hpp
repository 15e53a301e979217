#pragma once
// The Llama-family parity fixtures (tests/reference/make_llama_fixtures.py): a checkpoint saved by
// transformers, its inputs and targets, and its reference values (expected.json,
// reference.safetensors).
#include <memory>
#include <string>
#include <vector>

#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"

namespace hw::test {

struct LlamaFixture {
  std::string dir;
  nlohmann::json expected;
  std::unique_ptr<Model<float>> model;
  std::vector<int32_t> inputs, targets;
  int64_t B = 0, T = 0;
  io::SafetensorsReader reference;

  explicit LlamaFixture(const std::string& name)
      : dir(fixture_dir("hf_tiny_" + name)),
        expected(read_json(dir + "/expected.json")),
        model(load_model(dir, cpu_backend<float>())),
        reference(dir + "/reference.safetensors") {
    for (const auto& row : expected["input_ids"]) {
      ++B;
      T = int64_t(row.size());
      for (const auto& v : row) inputs.push_back(v.get<int32_t>());
    }
    for (const auto& row : expected["targets"])
      for (const auto& v : row) targets.push_back(v.get<int32_t>());
  }
  std::vector<int32_t> ids(const char* key) const {
    std::vector<int32_t> out;
    for (const auto& v : expected[key]) out.push_back(v.get<int32_t>());
    return out;
  }
};

}  // namespace hw::test

#pragma once
// Shared helpers for model tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "headwise/model/model.hpp"
#include "support/rel_err.hpp"

namespace hw::test {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

inline std::string fixture_dir(const std::string& name) {
  return std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// The gradient tests' model: 2 layers x 4 heads, 16 wide; `mixed` adds GQA (2 KV heads), RoPE
// and a plan with every head kind.
inline ModelConfig gradcheck_config(bool mixed) {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 16;
  c.vocab_size = 11;
  c.block_size = 12;
  if (mixed) {
    c.n_kv_head = 2;
    c.pos = "rope";
    c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
        R"([["softmax", "window:3", "sink_window:1:2", "static"], ["linear", "pruned", "softmax", "window:5"]])"));
  }
  return c;
}

// Copy every parameter and buffer of a float model into a double model of the same config.
inline void copy_to_double(Model<float>& from, Model<double>& to) {
  for (Arena* a : {&from.params(), &from.buffers()}) {
    Arena& dst_arena = a == &from.params() ? to.params() : to.buffers();
    for (const auto& t : a->tensors()) {
      Tensor& d = dst_arena.get(t->name);
      if (t->dtype == DType::I32) {
        std::memcpy(d.data, t->data, t->nbytes());
        continue;
      }
      for (int64_t i = 0; i < t->numel(); ++i) d.as<double>()[i] = double(t->f32()[i]);
    }
  }
  to.refresh_static_normalisers();
}

}  // namespace hw::test

#pragma once
// A tiny AAH run: 2 layers x 4 heads, context 16, windows {2, 4, 8, 16}, accumulation 2, warm-up
// 2 updates, a control update every 3 (control updates 2, 5, 8, 11 of 12).
#include <nlohmann/json.hpp>
#include <string>

#include "train/train_test_util.hpp"

namespace hw::test {

inline nlohmann::json tiny_aah_doc(const std::string& dir, const nlohmann::json& method_extra = nlohmann::json::object()) {
  nlohmann::json doc = tiny_run_doc(dir);
  doc["model"] = {{"n_layer", 2}, {"n_head", 4}, {"n_embd", 32}, {"block_size", 16}, {"vocab_size", 32}};
  doc["train"]["steps"] = 12;
  doc["train"]["eval_every"] = 6;
  doc["train"]["checkpoint_every"] = 0;
  nlohmann::json m = {{"name", "aah"}, {"windows", {2, 4, 8, 16}}, {"warmup_steps", 2}, {"control_every", 3}, {"seed", 3}};
  for (auto it = method_extra.begin(); it != method_extra.end(); ++it) m[it.key()] = it.value();
  doc["method"] = m;
  return doc;
}

}  // namespace hw::test

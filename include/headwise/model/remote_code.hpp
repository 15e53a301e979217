#pragma once
// The PyTorch model that ships with a checkpoint of a mixed head plan: transformers opens a
// model_type "headwise" folder through the two Python files its config.json's auto_map names
// (AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)), as it does for any
// architecture outside the library. The sources are python/headwise_hf/ in the repository,
// embedded in the binary at build time (CMakeLists.txt), so any copy of it can write them.
#include <string>

#include <nlohmann/json.hpp>

namespace hw {

inline constexpr const char* kRemoteConfigFile = "configuration_headwise.py";
inline constexpr const char* kRemoteModelFile = "modeling_headwise.py";

// config.json's auto_map for those files (AutoConfig and AutoModelForCausalLM).
inline nlohmann::json remote_code_auto_map() {
  return {{"AutoConfig", "configuration_headwise.HeadwiseConfig"},
          {"AutoModelForCausalLM", "modeling_headwise.HeadwiseForCausalLM"}};
}
// Writes both files into dir (atomically each), or removes them (a plan back to all-softmax).
void write_remote_code(const std::string& dir);
void remove_remote_code(const std::string& dir);

}  // namespace hw

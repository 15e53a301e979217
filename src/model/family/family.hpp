#pragma once
// The model families, one file each under src/model/family/ (gpt2.cpp, llama.cpp, qwen2.cpp,
// qwen3.cpp; the three Llama-style classes share llama_family.cpp): each family's Hugging Face
// class, its defaults, which choices it can hold, its config.json keys both ways, its tensor
// names and the module names PEFT's adapters use. families.cpp lists them; ModelConfig and hf_family.cpp reach a family only through
// this table. Adding a family is one file here and one line in families.cpp.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/model/hf_family.hpp"
#include "headwise/model/model_config.hpp"
#include "headwise/model/param_layout.hpp"

namespace hw {

// A module of one layer that a LoRA could adapt, as the class's transformers model names it
// (PEFT's tensor names are base_model.model.<name>.lora_{A,B}.weight).
struct HfModule {
  std::string name;       // "model.layers.0.self_attn.q_proj"
  int target;             // the LoraTarget it holds (Q for a fused q|k|v module), or -1: one headwise does not adapt
  std::string peft_key;   // the suffix target_modules names it by, unambiguous in the layer ("q_proj", "attn.c_proj")
};

struct ModelFamily {
  const char* name;      // model.family, and config.json's model_type
  const char* hf_class;  // config.json's architectures[0]
  // The keys whose default differs from GPT-2's (ModelConfig's own defaults).
  void (*set_defaults)(ModelConfig& c);
  // Throws "<who> <what it needs>" when c's choices do not fit the class; who = "model.family
  // <name> (<hf_class>)".
  void (*validate)(const ModelConfig& c, const std::string& who);
  // config.json (the class's keys plus headwise's), and back: j's model_type is this family's.
  nlohmann::json (*to_hf_config)(const ModelConfig& c);
  ModelConfig (*from_hf_config)(const nlohmann::json& j, const std::string& path);
  // The file tensors of the stored (GPT-2-layout) tensor s (hf_family.hpp).
  std::vector<HfTensor> (*hf_tensors)(const ModelConfig& c, const ParamSpec& s);
  // PEFT's view of the class (adapter_files.cpp, peft_config.cpp): the modules of layer l a LoRA
  // could adapt; whether q, k and v are one module (its target Q stands for all three) and its
  // weights [in, out] (Conv1D: PEFT's fan_in_fan_out); the name of the layer list in module
  // names (PEFT's layers_pattern).
  std::vector<HfModule> (*lora_modules)(int layer);
  bool fused_qkv;
  const char* layers_pattern;
};

// f's module of layer l that holds LoRA target t (for a fused family, k and v are in q's module).
HfModule lora_module(const ModelFamily& f, int layer, LoraTarget t);

// Every family, in the order error messages list them.
const std::vector<const ModelFamily*>& model_families();
// The family named `name`, or null.
const ModelFamily* find_family(const std::string& name);
// The family named `name`; any other name is one error listing the families.
const ModelFamily& family_named(const std::string& name);
// The families' names, each wrapped in `quote`, joined by ", " and `last` before the final one:
// family_names("\"", " or ") = "\"gpt2\", \"llama\", \"qwen2\" or \"qwen3\"".
std::string family_names(const std::string& quote, const std::string& last);

}  // namespace hw

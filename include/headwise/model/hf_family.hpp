#pragma once
// The Hugging Face side of the model families: which choices each class can hold, its
// config.json keys, and its tensor names (each family's own in its file under src/model/family/;
// ModelConfig::to_hf_config / from_hf_config write and read config.json). In memory every
// family keeps GPT-2's layout (fused c_attn [in, q|k|v out], c_fc [in, gate|up], Conv1D [in,
// out] weights: param_layout.hpp); on disk a Llama-family tensor is split and transposed into the class's own nn.Linear tensors
// ([out, in]): h.{l}.attn.c_attn.weight <-> model.layers.{l}.self_attn.{q,k,v}_proj.weight, etc.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/model/model_config.hpp"
#include "headwise/model/param_layout.hpp"

namespace hw {

// Throws naming the key when cfg's choices do not fit its family's Hugging Face class.
void validate_family(const ModelConfig& cfg);

// config.json's model_type and architectures. transformers computes every head as softmax, so
// only an all-softmax plan is written as the family's class (transformers opens it and computes
// the same model); any other plan is written as headwise's own type, model_type "headwise" /
// HeadwiseForCausalLM with the family in headwise_family, which transformers refuses instead of
// silently running the plan's static, window or linear heads as softmax.
void set_hf_model_type(nlohmann::json& j, const ModelConfig& cfg);
// The config.json of a model_type "headwise" checkpoint as its family's (model_type =
// headwise_family); one error naming the file when headwise_family is not a family headwise has.
nlohmann::json family_hf_config(const nlohmann::json& j, const std::string& path);

// The end-of-sequence ids generate stops at: eos_token_id (an id or a list) of DIR's
// generation_config.json, none without that file or key. An id outside [0, vocab) or a
// malformed file is one error naming the file.
std::vector<int32_t> eos_token_ids(const std::string& dir, int64_t vocab);

// One tensor of the family's file made of a stored (GPT-2-layout) tensor: the stored columns
// [col0, col0 + width) (the last dimension; a 1-D tensor is one row), transposed when the
// stored tensor is 2-D and the file's is [out, in].
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;  // in the file
  int64_t col0 = 0, width = 0;
  bool transpose = false;
};
// The file tensors of spec s under cfg.family (GPT-2: s itself, one tensor of the same name).
std::vector<HfTensor> hf_tensors(const ModelConfig& cfg, const ParamSpec& s);
// stored (s.stored_shape) -> the file tensor's values, and back into the stored tensor's columns.
void hf_split(const ParamSpec& s, const HfTensor& t, const float* stored, float* out);
void hf_join(const ParamSpec& s, const HfTensor& t, const float* in, float* stored);

}  // namespace hw

#pragma once
// What the Llama-style classes (Llama, Qwen2, Qwen3) share: RMSNorm, SwiGLU, RoPE, config.json's
// LlamaConfig keys, and q/k/v/o and gate/up/down split into nn.Linear tensors ([out, in]):
// h.{l}.attn.c_attn.weight <-> model.layers.{l}.self_attn.{q,k,v}_proj.weight, etc. Each
// class's file (llama.cpp, qwen2.cpp, qwen3.cpp) gives only how it differs: a LlamaVariant.
#include <string>
#include <vector>

#include "model/family/family.hpp"

namespace hw {

struct LlamaVariant {
  // Which biases the class can have, and its config.json keys for them.
  enum class Biases {
    AttentionAndMlp,  // attention_bias (q, k, v and o together) and mlp_bias: LlamaForCausalLM
    Attention,        // attention_bias only, no MLP biases: Qwen3ForCausalLM
    QkvAlways,        // q/k/v biases always, none on o or the MLP, no key: Qwen2ForCausalLM
  };
  Biases biases = Biases::AttentionAndMlp;
  bool qk_norm = false;              // q and k RMS-normalised per head (Qwen3)
  bool sliding_window_keys = false;  // use_sliding_window & co. (Qwen): written off, refused on
};

void llama_set_defaults(const LlamaVariant& v, ModelConfig& c);
void llama_validate(const LlamaVariant& v, const ModelConfig& c, const std::string& who);
nlohmann::json llama_to_hf_config(const LlamaVariant& v, const ModelConfig& c);
// j's model_type names the family (the caller looked it up).
ModelConfig llama_from_hf_config(const LlamaVariant& v, const nlohmann::json& j, const std::string& path);
std::vector<HfTensor> llama_hf_tensors(const ModelConfig& c, const ParamSpec& s);
// The modules of layer l: self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj, nn.Linear each
// ([out, in]); the layer list is "layers".
std::vector<HfModule> llama_lora_modules(int l);

}  // namespace hw

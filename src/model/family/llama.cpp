// Llama (LlamaForCausalLM): attention_bias for q, k, v and o together, and mlp_bias.
#include "model/family/llama_family.hpp"

namespace hw {

namespace {
constexpr LlamaVariant kLlamaVariant{LlamaVariant::Biases::AttentionAndMlp, false, false};
}  // namespace

extern const ModelFamily kLlamaFamily;
const ModelFamily kLlamaFamily = {
    "llama",
    "LlamaForCausalLM",
    [](ModelConfig& c) { llama_set_defaults(kLlamaVariant, c); },
    [](const ModelConfig& c, const std::string& who) { llama_validate(kLlamaVariant, c, who); },
    [](const ModelConfig& c) { return llama_to_hf_config(kLlamaVariant, c); },
    [](const nlohmann::json& j, const std::string& path) { return llama_from_hf_config(kLlamaVariant, j, path); },
    llama_hf_tensors,
    llama_lora_modules,
    /*fused_qkv=*/false,
    /*layers_pattern=*/"layers"};

}  // namespace hw

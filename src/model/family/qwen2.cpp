// Qwen2 (Qwen2ForCausalLM): q/k/v biases always (none on o or the MLP); its sliding-window keys written off.
#include "model/family/llama_family.hpp"

namespace hw {

namespace {
constexpr LlamaVariant kQwen2Variant{LlamaVariant::Biases::QkvAlways, false, true};
}  // namespace

extern const ModelFamily kQwen2Family;
const ModelFamily kQwen2Family = {
    "qwen2",
    "Qwen2ForCausalLM",
    [](ModelConfig& c) { llama_set_defaults(kQwen2Variant, c); },
    [](const ModelConfig& c, const std::string& who) { llama_validate(kQwen2Variant, c, who); },
    [](const ModelConfig& c) { return llama_to_hf_config(kQwen2Variant, c); },
    [](const nlohmann::json& j, const std::string& path) { return llama_from_hf_config(kQwen2Variant, j, path); },
    llama_hf_tensors,
    llama_lora_modules,
    /*fused_qkv=*/false,
    /*layers_pattern=*/"layers"};

}  // namespace hw

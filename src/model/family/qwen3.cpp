// Qwen3 (Qwen3ForCausalLM): q and k RMS-normalised per head, attention_bias, no MLP biases; its
// sliding-window keys written off.
#include "model/family/llama_family.hpp"

namespace hw {

namespace {
constexpr LlamaVariant kQwen3Variant{LlamaVariant::Biases::Attention, true, true};
}  // namespace

extern const ModelFamily kQwen3Family;
const ModelFamily kQwen3Family = {
    "qwen3",
    "Qwen3ForCausalLM",
    [](ModelConfig& c) { llama_set_defaults(kQwen3Variant, c); },
    [](const ModelConfig& c, const std::string& who) { llama_validate(kQwen3Variant, c, who); },
    [](const ModelConfig& c) { return llama_to_hf_config(kQwen3Variant, c); },
    [](const nlohmann::json& j, const std::string& path) { return llama_from_hf_config(kQwen3Variant, j, path); },
    llama_hf_tensors,
    llama_lora_modules,
    /*fused_qkv=*/false,
    /*layers_pattern=*/"layers"};

}  // namespace hw

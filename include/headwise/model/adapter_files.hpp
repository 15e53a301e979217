#pragma once
// LoRA adapters on disk, in Hugging Face PEFT's form for GPT-2: DIR/adapter_model.safetensors
// with "base_model.model.transformer.h.<l>.attn.{c_attn,c_proj}.lora_{A,B}.weight" ([rank, in]
// and [out, rank]) and DIR/adapter_config.json (peft_type LORA, fan_in_fan_out, target_modules).
//
// GPT-2 fuses q|k|v into c_attn; headwise gives each of q, k, v its own rank-r adapter. Their
// sum is one c_attn adapter of rank m r (m = how many of q, k, v are targeted): A stacks the m
// A matrices, B is block-diagonal (q rows x the first r columns, ...), and alpha_pattern scales
// alpha by m so that alpha / rank stays the same. Reading unpacks the blocks and refuses a
// c_attn adapter with anything outside them.
//
// The Llama family (Llama, Qwen2, Qwen3) uses PEFT's names for those classes, one adapter per
// projection: "base_model.model.model.layers.<l>.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight"
// ([rank, in] and [out, rank]), target_modules q_proj/k_proj/v_proj/o_proj, fan_in_fan_out false,
// so PeftModel.from_pretrained loads them onto the transformers model.
#include <string>

#include "headwise/model/model.hpp"

namespace hw {

constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
constexpr const char* kAdapterConfigFile = "adapter_config.json";

// Writes both files (atomically each). The model must have adapters.
void save_adapter_files(const Model<float>& model, const std::string& dir);
// Reads the adapters of `model` (same model.lora) from dir; errors name the file and tensor.
void load_adapter_files(Model<float>& model, const std::string& dir);

}  // namespace hw

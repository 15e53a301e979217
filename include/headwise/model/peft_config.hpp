#pragma once
// PEFT's adapter_config.json, read and honoured: which projections of which layers an adapter
// adapts (target_modules, exclude_modules, layers_to_transform / layers_pattern), each one's rank
// and scaling (r, lora_alpha, rank_pattern, alpha_pattern, use_rslora: alpha / r, or alpha /
// sqrt(r)), fan_in_fan_out (a bool: PEFT itself sets it from the module type, GPT-2's Conv1D
// true, nn.Linear false; the tensors' shapes are the same either way).
//
// headwise holds one LoRA configuration (model.lora: one rank and alpha for every adapted
// projection): an adapter whose modules differ in rank or scaling is held at the largest rank,
// each module's A and B padded with zero rows and columns (which stay zero in training: neither
// gets a gradient) and its scaling folded into its B (B' = B s_module / s_model), so the model
// computes what PEFT computes; headwise writes it back in that uniform form.
//
// GPT-2 fuses q|k|v into c_attn. A c_attn adapter in headwise's own packed form (its config.json's
// headwise_lora with m targeted projections of rank r, the adapter of rank m r, B block-diagonal)
// unpacks into those projections; any other (PEFT's: one rank-R adapter over the fused matrix)
// gives q, k and v each a rank-R adapter, with that A and the rows of B that project to them.
//
// What headwise cannot apply is one error naming the file and the key: another peft_type, DoRA
// (use_dora), trained biases (bias, lora_bias), modules_to_save, layer_replication,
// target_parameters, trainable tokens, and target modules other than the attention projections
// (MLP projections, embeddings, the LM head).
#include <string>
#include <vector>

#include "headwise/model/lora_config.hpp"
#include "headwise/model/model_config.hpp"

namespace hw {

// One adapted projection as PEFT defines it.
struct PeftModule {
  int layer = 0;
  std::string module;   // the module's name in the family's model ("model.layers.0.self_attn.q_proj")
  LoraTarget target{};  // GPT-2's c_attn: Q (its q, k, v targets follow from `packed`)
  int rank = 0;
  double scaling = 0.0;
};

struct PeftAdapters {
  LoraConfig lora;                  // what the model holds (largest rank; scaling of the first module)
  std::vector<PeftModule> modules;  // in layer order, q, k, v, o (GPT-2: c_attn, c_proj)
  bool packed_c_attn = false;       // GPT-2: c_attn in headwise's packed form
  std::string path;                 // adapter_config.json, for messages
};

// Reads DIR/adapter_config.json for a model of config `model`, whose lora (config.json's
// headwise_lora, or none) recognises headwise's packed c_attn and gives freeze_base.
PeftAdapters read_peft_adapters(const std::string& dir, const ModelConfig& model);

}  // namespace hw

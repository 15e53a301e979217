#pragma once
// Rotary frequencies of a model: theta^(-2i/head_dim) for i < head_dim/2, rescaled by Llama 3's
// rope_scaling when the config has one (as transformers' _compute_llama3_parameters, in double).
#include <vector>

#include "headwise/model/model_config.hpp"

namespace hw {

std::vector<double> rope_inv_freq(const ModelConfig& cfg);

}  // namespace hw

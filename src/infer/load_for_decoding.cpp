#include "headwise/infer/load_for_decoding.hpp"

#include <malloc.h>

#include "headwise/model/checkpoint.hpp"

namespace hw::infer {

DecodingModel load_for_decoding(const std::string& dir, WeightPrecision weights) {
  DecodingModel d;
  const ModelConfig cfg = read_checkpoint_config(dir);
  if (cfg.lora.enabled()) {
    d.model = load_model(dir, cpu_backend<float>(), /*trainable=*/false);
    d.model->merge_adapters();  // decoding reads the merged weights
    return d;
  }
  io::SafetensorsSet st(dir);
  d.model = std::make_unique<Model<float>>(cfg, cpu_backend<float>(), read_head_extras(st, cfg), /*trainable=*/false);
  Model<float>& model = *d.model;
  if (weights == WeightPrecision::FP32) {
    load_weights(model, st, [&](const std::string& name, Tensor& t) { relay_out_in(model, name, t.f32()); });
    d.fp32_layout = Fp32Layout::OutIn;
    malloc_trim(0);  // (the re-lay's scratch copies)
    return d;
  }
  load_weights(model, st, [&](const std::string& name, Tensor& t) {
    if (d.half.take(model, weights, name, t.f32())) model.params().discard(t);
    // The loader's staging vectors (re-laid tensors) stay in malloc's heap once freed, and the
    // 16-bit matrices live in their own mapping, so nothing would reuse them: hand them back.
    malloc_trim(0);
  });
  return d;
}

Fp32Layout relay_for_decoding(Model<float>& model, WeightPrecision weights) {
  if (weights != WeightPrecision::FP32 || model.config().lora.enabled()) return Fp32Layout::InOut;
  for (const auto& t : model.params().tensors()) relay_out_in(model, t->name, t->f32());
  return Fp32Layout::OutIn;
}

}  // namespace hw::infer

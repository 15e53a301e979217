#pragma once
// A look at each layer's attention during ordinary forwards and backwards, for planners that
// score heads from training itself (AAH's statistics, SAF's Gate-Taylor control). The model
// calls the observer only while one is set (Model::set_attention_observer); with none set a
// step does no extra work. Observing reads the layer's tensors back to the host, widened to
// double: it costs a device-to-host copy per layer and is meant for the updates that ask.
#include <cstdint>
#include <vector>

#include "headwise/attention/head_plan.hpp"

namespace hw {

struct AttentionView {
  int layer = 0;
  int64_t B = 0, T = 0;
  const attn::LayerPlan* plan = nullptr;      // the layer's head kinds
  const attn::LayerLayout* layout = nullptr;  // where each head's columns are
  const std::vector<double>* qkv = nullptr;   // [B*T, layout->qkv_width()], after RoPE
  const std::vector<double>* out = nullptr;   // [B*T, layout->out_width()], the heads' outputs
  const std::vector<double>* dout = nullptr;  // backward only: d(loss) / d(out), same shape
};

class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  // Forward, right after layer `v.layer`'s attention (dout is null).
  virtual void on_forward(const AttentionView& /*v*/) {}
  // Whether on_backward is wanted (reading the gradient back costs a second copy).
  virtual bool wants_backward() const { return false; }
  // Backward, once the gradient of the layer's attention output is known (layers in reverse).
  virtual void on_backward(const AttentionView& /*v*/) {}
};

}  // namespace hw

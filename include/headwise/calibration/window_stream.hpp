#pragma once
// Calibration windows streamed through a model layer by layer (SAF's statistics, OAL's
// contribution statistics and fits): every batch of windows runs through one layer, its QKV is
// handed to the caller right after that layer, and only the batch's input to the next layer is
// kept (Model::save_layer_input: 2 x B*T x n_embd per batch). The model runs with forward-only
// activations (Model::set_forward_only) while the stream lives, so memory holds one layer's
// activations, the windows' layer inputs and whatever the caller keeps per layer, never a
// quantity that grows with n_layer x T. The numbers are those of Model::forward, bit for bit
// (the same ops in the same order; a layer input is saved and loaded byte for byte).
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/model/model.hpp"

namespace hw {

class WindowStream {
 public:
  // batches: each B*T input tokens (row-major [B][T]).
  WindowStream(Model<float>& model, int64_t B, int64_t T, std::vector<std::vector<int32_t>> batches);
  ~WindowStream();  // gives the model its own activation mode back
  WindowStream(const WindowStream&) = delete;
  WindowStream& operator=(const WindowStream&) = delete;

  int layer() const { return next_; }  // the layer whose input every batch holds
  size_t batches() const { return tokens_.size(); }
  // Layer l's QKV of one batch, [B*T, layouts()[l].qkv_width()] after RoPE, valid during the call.
  using Visit = std::function<void(int layer, size_t batch, const std::vector<float>& qkv)>;
  // Every batch through layers [layer(), l1) in batch order, layer after layer within a batch;
  // visit (may be empty) after each. l1 <= n_layer; l1 == layer() does nothing.
  void advance(int l1, const Visit& visit);
  // Layer layer()'s QKV of every batch, computed up to the QKV only (Model::forward_layer_qkv),
  // to visit: for the last layer a caller reads, whose attention and MLP nothing needs. The
  // stream stays at layer(): each batch keeps its input to it.
  void visit_qkv(const Visit& visit);
  // Bytes of the layer inputs held between calls (the stream's own memory).
  size_t held_bytes() const;
  double forward_seconds() const { return forward_seconds_; }

 private:
  void start_batch(size_t b);

  Model<float>& model_;
  int64_t B_, T_;
  bool was_forward_only_;
  int next_ = 0;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<std::vector<unsigned char>> inputs_;  // per batch: its input to layer next_
  std::vector<float> qkv_;
  double forward_seconds_ = 0.0;
};

}  // namespace hw

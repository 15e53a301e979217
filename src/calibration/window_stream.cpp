#include "headwise/calibration/window_stream.hpp"

#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"

namespace hw {

WindowStream::WindowStream(Model<float>& model, int64_t B, int64_t T, std::vector<std::vector<int32_t>> batches)
    : model_(model), B_(B), T_(T), was_forward_only_(model.forward_only()), tokens_(std::move(batches)) {
  for (const auto& b : tokens_)
    check(int64_t(b.size()) == B * T, "WindowStream: a batch of " + std::to_string(b.size()) + " tokens, not B*T = " +
                                          std::to_string(B * T));
  inputs_.resize(tokens_.size());
  model_.set_forward_only(true);
}

WindowStream::~WindowStream() { model_.set_forward_only(was_forward_only_); }

size_t WindowStream::held_bytes() const {
  size_t n = 0;
  for (const auto& in : inputs_) n += in.size();
  return n;
}

// Batch b's input to layer next_ into the model's activations.
void WindowStream::start_batch(size_t b) {
  if (next_ == 0) {
    model_.forward_start(tokens_[b].data(), B_, T_);
  } else {
    model_.reserve_activations(B_, T_);  // (a no-op unless someone else used the model meanwhile)
    model_.load_layer_input(next_, inputs_[b]);
  }
}

void WindowStream::visit_qkv(const Visit& visit) {
  check(next_ < model_.config().n_layer, "WindowStream: no layer " + std::to_string(next_) + " to visit");
  for (size_t b = 0; b < tokens_.size(); ++b) {
    const Stopwatch batch_time;
    start_batch(b);
    model_.forward_layer_qkv(next_);
    forward_seconds_ += batch_time.seconds();
    model_.read_layer_qkv(next_, qkv_);
    visit(next_, b, qkv_);
  }
}

void WindowStream::advance(int l1, const Visit& visit) {
  const int L = model_.config().n_layer;
  check(next_ <= l1 && l1 <= L, "WindowStream: cannot go from layer " + std::to_string(next_) + " to " +
                                    std::to_string(l1));
  if (l1 == next_) return;
  for (size_t b = 0; b < tokens_.size(); ++b) {
    const Stopwatch batch_time;
    start_batch(b);
    double host = 0.0;
    for (int l = next_; l < l1; ++l) {
      model_.forward_layer(l);
      if (!visit) continue;
      const Stopwatch visit_time;
      model_.read_layer_qkv(l, qkv_);
      visit(l, b, qkv_);
      host += visit_time.seconds();
    }
    if (l1 < L) model_.save_layer_input(l1, inputs_[b]);
    else std::vector<unsigned char>().swap(inputs_[b]);  // nothing left to run
    forward_seconds_ += batch_time.seconds() - host;
  }
  next_ = l1;
}

}  // namespace hw

// Provisional body of the batched decoder (batch_decoder.hpp): one Decoder per slot, fed one
// after the other. It fixes the interface and its checks; the batched engine (one forward over
// every listed slot's rows) replaces Impl and feed's loop.
#include "headwise/infer/batch_decoder.hpp"

#include <string>
#include <utility>

#include "headwise/core/error.hpp"

namespace hw::infer {

size_t kv_cache_bytes(const ModelConfig& cfg, const attn::HeadPlan& plan, int64_t context, KvPrecision kv) {
  check(context >= 1, "kv_cache_bytes: the context must be >= 1");
  check(int(plan.layers.size()) == cfg.n_layer, "kv_cache_bytes: the plan has " + std::to_string(plan.layers.size()) +
                                                    " layers, the model " + std::to_string(cfg.n_layer));
  const size_t D = size_t(cfg.head_dim());
  const size_t bpv = kv == KvPrecision::FP32 ? 4 : 2;
  const size_t state = sizeof(float) * size_t(linear_features(cfg.head_dim())) * (D + 1);
  size_t bytes = 0;
  for (const auto& layer : plan.layers)
    for (const KvHeadPolicy& p : layer_policies(layer, cfg.n_head, cfg.kv_heads(), context))
      bytes += bpv * D * size_t(p.slots) * (size_t(p.has_k) + size_t(p.has_v)) + (p.linear_state ? state : 0);
  return bytes;
}

struct BatchDecoder::Impl {
  std::vector<std::unique_ptr<Decoder>> dec;  // one per slot
  std::vector<bool> open;
  std::vector<const float*> logits;  // per slot: the last row's, or nullptr before the first feed
};

BatchDecoder::BatchDecoder(const Model<float>& model, const BatchDecoderOptions& opts, HalfWeights half)
    : opts_(opts), impl_(std::make_unique<Impl>()) {
  check(opts.max_batch >= 1, "batch decoder: max_batch must be >= 1, got " + std::to_string(opts.max_batch));
  check(opts.max_context >= 1 && opts.max_context <= model.config().block_size,
        "batch decoder: max_context " + std::to_string(opts.max_context) + " must be in 1..the model's block_size (" +
            std::to_string(model.config().block_size) + ")");
  check(opts.chunk >= 1, "batch decoder: chunk must be >= 1");
  // 16-bit weights: rounded once here when not given, so that every slot shares one copy.
  if (opts.weights != WeightPrecision::FP32 && half.empty())
    for (const auto& t : model.params().tensors()) half.take(model, opts.weights, t->name, t->f32());
  const size_t B = size_t(opts.max_batch);
  impl_->dec.reserve(B);
  for (size_t s = 0; s < B; ++s)
    impl_->dec.push_back(std::make_unique<Decoder>(model, opts.max_context, opts.chunk, opts.split_cols, opts.weights,
                                                   half, opts.kv, opts.layout));
  impl_->open.assign(B, false);
  impl_->logits.assign(B, nullptr);
}

BatchDecoder::~BatchDecoder() = default;

int BatchDecoder::vocab_size() const { return impl_->dec[0]->vocab_size(); }

void BatchDecoder::check_slot(int slot, const char* who) const {
  check(slot >= 0 && slot < opts_.max_batch && impl_->open[size_t(slot)],
        std::string("batch decoder: ") + who + ": slot " + std::to_string(slot) + " is not open");
}

int BatchDecoder::open() {
  for (int s = 0; s < opts_.max_batch; ++s)
    if (!impl_->open[size_t(s)]) {
      impl_->open[size_t(s)] = true;
      impl_->dec[size_t(s)]->reset();
      impl_->logits[size_t(s)] = nullptr;
      return s;
    }
  fail("batch decoder: all " + std::to_string(opts_.max_batch) + " slots are open");
}

void BatchDecoder::close(int slot) {
  check_slot(slot, "close");
  impl_->open[size_t(slot)] = false;
  impl_->logits[size_t(slot)] = nullptr;
}

bool BatchDecoder::is_open(int slot) const {
  return slot >= 0 && slot < opts_.max_batch && impl_->open[size_t(slot)];
}

int BatchDecoder::live() const {
  int n = 0;
  for (bool o : impl_->open) n += o ? 1 : 0;
  return n;
}

int64_t BatchDecoder::position(int slot) const {
  check_slot(slot, "position");
  return impl_->dec[size_t(slot)]->position();
}

void BatchDecoder::feed(const SlotTokens* batch, size_t count) {
  // Every entry first, so that a bad one leaves every slot as it was.
  std::vector<bool> seen(size_t(opts_.max_batch), false);
  const int V = vocab_size();
  for (size_t i = 0; i < count; ++i) {
    const SlotTokens& e = batch[i];
    check_slot(e.slot, "feed");
    const std::string who = "batch decoder: feed: slot " + std::to_string(e.slot);
    check(!seen[size_t(e.slot)], who + " is listed twice");
    seen[size_t(e.slot)] = true;
    check(e.n >= 1 && e.tokens != nullptr, who + " has no tokens");
    const int64_t pos = impl_->dec[size_t(e.slot)]->position();
    check(pos + e.n <= opts_.max_context, who + ": " + std::to_string(e.n) + " tokens at position " +
                                              std::to_string(pos) + " pass the context of " +
                                              std::to_string(opts_.max_context));
    for (int64_t j = 0; j < e.n; ++j)
      check(e.tokens[j] >= 0 && e.tokens[j] < V,
            who + ": token " + std::to_string(e.tokens[j]) + " is outside the vocabulary of " + std::to_string(V));
  }
  // (the engine: one forward over every entry's rows, in chunks of opts_.chunk rows)
  for (size_t i = 0; i < count; ++i)
    impl_->logits[size_t(batch[i].slot)] = impl_->dec[size_t(batch[i].slot)]->prefill(batch[i].tokens, batch[i].n);
}

const float* BatchDecoder::logits(int slot) const {
  check_slot(slot, "logits");
  check(impl_->logits[size_t(slot)] != nullptr,
        "batch decoder: logits: slot " + std::to_string(slot) + " has been fed nothing since it was opened");
  return impl_->logits[size_t(slot)];
}

size_t BatchDecoder::cache_bytes() const { return impl_->dec[0]->kv_bytes(); }

size_t BatchDecoder::scratch_bytes() const {
  size_t n = 0;
  for (const auto& d : impl_->dec) n += d->scratch_bytes();
  return n;
}

size_t BatchDecoder::half_weight_bytes() const { return impl_->dec[0]->half_weight_bytes(); }

size_t BatchDecoder::weight_bytes_per_step() const { return impl_->dec[0]->weight_bytes_per_token(); }

const KvCache& BatchDecoder::cache(int slot) const {
  check_slot(slot, "cache");
  return impl_->dec[size_t(slot)]->cache();
}

}  // namespace hw::infer

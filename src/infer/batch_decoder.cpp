// The batched decoder (batch_decoder.hpp): a KV cache per slot and one CachedForward over the
// rows of every slot a feed lists.
#include "headwise/infer/batch_decoder.hpp"

#include <string>
#include <utility>

#include "headwise/core/error.hpp"
#include "infer/cached_forward.hpp"

namespace hw::infer {

size_t kv_cache_bytes(const ModelConfig& cfg, const attn::HeadPlan& plan, int64_t context, attn::KvPrecision kv) {
  check(context >= 1, "kv_cache_bytes: the context must be >= 1");
  check(int(plan.layers.size()) == cfg.n_layer, "kv_cache_bytes: the plan has " + std::to_string(plan.layers.size()) +
                                                    " layers, the model " + std::to_string(cfg.n_layer));
  return attn::KvCache::bytes_for(plan, cfg.n_head, cfg.kv_heads(), cfg.head_dim(), context, kv);
}

struct BatchDecoder::Impl {
  std::vector<std::unique_ptr<attn::KvCache>> caches;  // one per slot, allocated at construction
  std::vector<bool> open;
  std::vector<bool> fed;                // the slot has logits since it was opened
  std::vector<std::vector<float>> logits;  // per slot: the last row's
  std::unique_ptr<CachedForward> forward;
  // a pass's sequences, their rows' tokens and where their last logits go (sized once)
  std::vector<attn::CachedRows> rows;
  std::vector<int32_t> tokens;
  std::vector<float*> last;
  std::vector<int64_t> done;  // per feed entry: tokens already run
  std::vector<char> seen;     // per slot: listed in this feed
};

BatchDecoder::BatchDecoder(const Model<float>& model, const BatchDecoderOptions& opts, HalfWeights half)
    : opts_(opts), impl_(std::make_unique<Impl>()) {
  check(opts.max_batch >= 1, "batch decoder: max_batch must be >= 1, got " + std::to_string(opts.max_batch));
  check_decodable(model, opts.max_context, opts.chunk, opts.split_cols, opts.weights, opts.layout);
  opts_.chunk = std::min(opts.chunk, opts.max_context);
  const ModelConfig& cfg = model.config();
  const size_t B = size_t(opts.max_batch);
  Impl& m = *impl_;
  for (size_t s = 0; s < B; ++s)
    m.caches.push_back(std::make_unique<attn::KvCache>(cfg.head_plan, cfg.n_head, cfg.kv_heads(), cfg.head_dim(),
                                                       opts.max_context, opts.kv));
  m.forward = std::make_unique<CachedForward>(model, *m.caches[0], opts_.chunk, opts.max_batch, opts.split_cols,
                                              opts.weights, std::move(half), opts.layout);
  m.open.assign(B, false);
  m.fed.assign(B, false);
  m.logits.assign(B, std::vector<float>(size_t(m.forward->vocab_size())));
  m.rows.reserve(B);
  m.tokens.resize(B * size_t(opts_.chunk));
  m.last.reserve(B);
  m.done.resize(B);
  m.seen.assign(B, 0);
}

BatchDecoder::~BatchDecoder() = default;

int BatchDecoder::vocab_size() const { return impl_->forward->vocab_size(); }

void BatchDecoder::check_slot(int slot, const char* who) const {
  if (!(slot >= 0 && slot < opts_.max_batch && impl_->open[size_t(slot)]))
    fail(std::string("batch decoder: ") + who + ": slot " + std::to_string(slot) + " is not open");
}

int BatchDecoder::open() {
  for (int s = 0; s < opts_.max_batch; ++s)
    if (!impl_->open[size_t(s)]) {
      impl_->open[size_t(s)] = true;
      impl_->caches[size_t(s)]->reset();
      impl_->fed[size_t(s)] = false;
      return s;
    }
  fail("batch decoder: all " + std::to_string(opts_.max_batch) + " slots are open");
}

void BatchDecoder::close(int slot) {
  check_slot(slot, "close");
  impl_->open[size_t(slot)] = false;
  impl_->fed[size_t(slot)] = false;
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
  return impl_->caches[size_t(slot)]->length();
}

void BatchDecoder::feed(const SlotTokens* batch, size_t count) {
  Impl& m = *impl_;
  // Every entry first, so that a bad one leaves every slot as it was. (Messages are built only
  // on failure: a decode step allocates nothing.)
  const int V = vocab_size();
  std::fill(m.seen.begin(), m.seen.end(), 0);
  auto who = [&](const SlotTokens& e) { return "batch decoder: feed: slot " + std::to_string(e.slot); };
  for (size_t i = 0; i < count; ++i) {
    const SlotTokens& e = batch[i];
    check_slot(e.slot, "feed");
    if (m.seen[size_t(e.slot)]) fail(who(e) + " is listed twice");
    m.seen[size_t(e.slot)] = 1;
    if (e.n < 1 || e.tokens == nullptr) fail(who(e) + " has no tokens");
    const int64_t pos = m.caches[size_t(e.slot)]->length();
    if (pos + e.n > opts_.max_context)
      fail(who(e) + ": " + std::to_string(e.n) + " tokens at position " + std::to_string(pos) +
           " pass the context of " + std::to_string(opts_.max_context));
    for (int64_t j = 0; j < e.n; ++j)
      if (e.tokens[j] < 0 || e.tokens[j] >= V)
        fail(who(e) + ": token " + std::to_string(e.tokens[j]) + " is outside the vocabulary of " + std::to_string(V));
  }
  // Passes of one forward each: up to `chunk` rows of every entry that has tokens left, the
  // entries' rows one after another.
  std::fill(m.done.begin(), m.done.begin() + int64_t(count), 0);
  for (;;) {
    m.rows.clear();
    m.last.clear();
    int64_t row = 0;
    for (size_t i = 0; i < count; ++i) {
      const SlotTokens& e = batch[i];
      const int64_t n = std::min(opts_.chunk, e.n - m.done[i]);
      if (n <= 0) continue;
      std::copy(e.tokens + m.done[i], e.tokens + m.done[i] + n, m.tokens.begin() + row);
      m.rows.push_back({m.caches[size_t(e.slot)].get(), row, n});
      m.last.push_back(m.logits[size_t(e.slot)].data());
      m.done[i] += n;
      row += n;
    }
    if (m.rows.empty()) break;
    m.forward->run(m.tokens.data(), m.rows.data(), int(m.rows.size()), nullptr, m.last.data());
  }
  for (size_t i = 0; i < count; ++i) m.fed[size_t(batch[i].slot)] = true;
}

void BatchDecoder::copy_slot(int from, int to) {
  check_slot(from, "copy_slot");
  check_slot(to, "copy_slot");
  Impl& m = *impl_;
  check(m.fed[size_t(from)], "batch decoder: copy_slot: slot " + std::to_string(from) + " has been fed nothing");
  if (from == to) return;
  m.caches[size_t(to)]->copy_from(*m.caches[size_t(from)]);
  m.logits[size_t(to)] = m.logits[size_t(from)];
  m.fed[size_t(to)] = true;
}

const float* BatchDecoder::logits(int slot) const {
  check_slot(slot, "logits");
  check(impl_->fed[size_t(slot)],
        "batch decoder: logits: slot " + std::to_string(slot) + " has been fed nothing since it was opened");
  return impl_->logits[size_t(slot)].data();
}

size_t BatchDecoder::cache_bytes() const { return impl_->caches[0]->bytes(); }

size_t BatchDecoder::scratch_bytes() const {
  const Impl& m = *impl_;
  return m.forward->scratch_bytes() + m.logits.size() * m.logits[0].size() * sizeof(float) +
         m.tokens.size() * sizeof(int32_t);
}

size_t BatchDecoder::half_weight_bytes() const { return impl_->forward->half_weight_bytes(); }

size_t BatchDecoder::weight_bytes_per_step() const { return impl_->forward->weight_bytes_per_token(); }

const attn::KvCache& BatchDecoder::cache(int slot) const {
  check_slot(slot, "cache");
  return *impl_->caches[size_t(slot)];
}

}  // namespace hw::infer

#pragma once
// Batched cached decoding: up to max_batch sequences, each in a slot with its own KV cache sized
// from the head plan (kv_cache.hpp: per KV head all positions, a ring of W, sink S + ring, or a
// linear head's state), advanced together. One feed() call advances every listed slot by its
// tokens (a prompt chunk or one decoded token each); the engine computes them as one forward over
// all their rows (the matrix products become GEMMs over the batch), each row at its own
// sequence's position, attending only to its own sequence's cache. A sequence's logits equal
// those of feeding it alone to a CachedDecoder (decoder.hpp) with the same options, whatever else is in
// the batch: greedy tokens are the same, one at a time or batched.
//
// Memory: the fp32 weights are the model's own; 16-bit weights are rounded once (or given) and
// held once; one scratch for max_batch x chunk rows (cached_forward.cpp).
// Nothing is allocated after construction: every slot's cache exists from the start (a closed
// slot keeps its memory for the next sequence), so max_batch x cache_bytes() is held however
// many sequences are live.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "headwise/infer/cached_decoder.hpp"
#include "headwise/attention/kv_cache.hpp"
#include "headwise/model/model.hpp"

namespace hw::infer {

struct BatchDecoderOptions {
  int max_batch = 1;         // slots (>= 1)
  int64_t max_context = 0;   // positions each slot's cache holds (1 .. the model's block_size)
  int64_t chunk = 64;        // rows per forward pass of a feed (>= 1; a feed of more rows runs in several)
  int64_t split_cols = 512;  // as CachedDecoder's
  WeightPrecision weights = WeightPrecision::FP32;
  attn::KvPrecision kv = attn::KvPrecision::FP32;
  Fp32Layout layout = Fp32Layout::InOut;  // as CachedDecoder's (fp32 weights)
};

// One slot's part of a feed: n >= 1 tokens, appended at the slot's positions
// position(slot) .. position(slot) + n - 1.
struct SlotTokens {
  int slot = -1;
  const int32_t* tokens = nullptr;
  int64_t n = 0;
};

// KV-cache bytes of one sequence of `context` positions under `plan` (the model's shape from
// cfg: n_head, kv_heads, head_dim), without allocating: attn::KvCache::bytes_for (kv_cache.hpp's
// formula, the one sizing rule), after checking that the plan fits the model.
size_t kv_cache_bytes(const ModelConfig& cfg, const attn::HeadPlan& plan, int64_t context, attn::KvPrecision kv);

class BatchDecoder {
 public:
  // model: as CachedDecoder (CPU backend, the plan final). half: 16-bit copies of the matrices
  // (load_for_decoding), or empty: rounded here once from the model for 16-bit weights.
  BatchDecoder(const Model<float>& model, const BatchDecoderOptions& opts, HalfWeights half = {});
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  int max_batch() const { return opts_.max_batch; }
  int64_t max_context() const { return opts_.max_context; }
  int vocab_size() const;
  const BatchDecoderOptions& options() const { return opts_; }

  // The lowest free slot, its cache empty (position 0); throws hw::Error when every slot is open.
  int open();
  // Frees the slot (its cache is reset when it is opened again). Throws for a slot not open.
  void close(int slot);
  bool is_open(int slot) const;
  int live() const;                   // open slots
  int64_t position(int slot) const;   // tokens the slot has consumed since open()

  // Advances each listed slot by its tokens, all in one call (distinct open slots, n >= 1 each,
  // tokens in the vocabulary, position + n <= max_context). Every entry is checked first: on a
  // bad one, one hw::Error naming the slot and no slot advances.
  void feed(const SlotTokens* batch, size_t count);
  void feed(const std::vector<SlotTokens>& batch) { feed(batch.data(), batch.size()); }
  // Slot `to` (open) becomes a copy of slot `from` (open, fed): its cache, position and logits,
  // as if it had been fed the same tokens (a prompt shared by several sequences).
  void copy_slot(int from, int to);
  // Logits (vocab floats) of the last token fed to `slot`; valid until the next feed or close.
  const float* logits(int slot) const;

  // KV-cache bytes of one slot (each slot holds the same: kv_cache_bytes(model's config, plan,
  // max_context, kv)), of the engine's scratch (all slots), of its 16-bit weight copies (0 for
  // fp32; held once) and the matrix bytes one forward step reads.
  size_t cache_bytes() const;
  size_t scratch_bytes() const;
  size_t half_weight_bytes() const;
  size_t weight_bytes_per_step() const;
  // The cache of an open slot (tests, reports).
  const attn::KvCache& cache(int slot) const;

 private:
  struct Impl;
  void check_slot(int slot, const char* who) const;
  BatchDecoderOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hw::infer

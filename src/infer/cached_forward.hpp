#pragma once
// The forward of cached decoding, shared by the one-sequence decoder (CachedDecoder) and the
// batched one (BatchDecoder): rows of one or more sequences, each appended at its own cache's
// next positions, through the embeddings, the layer sequence of the training forward
// (model/layer_forward.hpp: the products read in the decoder's precision and layout, RoPE at
// each row's position, attn::CachedAttention against each row's own cache) and the LM head.
// The matrix products run once over all the rows: with B sequences in a decode step they are
// GEMMs over the batch, and the weights are read once for all of them.
#include <cstdint>
#include <memory>
#include <vector>

#include "headwise/attention/cached_attention.hpp"
#include "headwise/infer/cached_decoder.hpp"

namespace hw::infer {

class CachedForward {
 public:
  // like: a cache of the shape every run passes; rows: rows of one sequence per run (>= 1);
  // max_seqs: sequences per run; the rest as CachedDecoder's constructor (which checks them).
  CachedForward(const Model<float>& model, const attn::KvCache& like, int64_t rows, int max_seqs,
                int64_t split_cols, WeightPrecision weights, HalfWeights half, Fp32Layout layout);
  ~CachedForward();

  // tokens: the rows of seqs[0], then seqs[1], ... (seqs[s].row0 = the offset of its first row,
  // seqs[s].n <= rows); every cache advances by its rows. all_logits (total rows x vocab) when
  // given; last[s] (vocab floats) receives the logits of sequence s's last row. Tokens and
  // lengths must have been checked by the caller.
  void run(const int32_t* tokens, const attn::CachedRows* seqs, int n_seqs, float* all_logits, float* const* last);

  int vocab_size() const;
  size_t scratch_bytes() const;
  size_t half_weight_bytes() const;
  size_t weight_bytes_per_token() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hw::infer

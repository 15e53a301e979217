#pragma once
// Cached decoding of one sequence over a model's head plan: prefill (the prompt, in chunks of
// rows) and decode (one token at a time) are the same computation on n rows: the training
// forward's layer sequence (src/model/layer_forward.hpp) with RoPE at the rows' original
// positions and attention against the KV cache (src/attention/kv_cache.cpp: positions < the
// first row) and the rows themselves (src/attention/cached_attention.cpp: each kind's cached
// step beside its math); then the rows' K/V go into the cache and the linear heads' prefix
// states. The weights are the model's own (its LayerLayout's compact columns), so build the
// decoder after the plan is final; a plan change afterwards needs a new decoder. Several
// sequences at once: batch_decoder.hpp, over the same forward (src/infer/cached_forward.cpp).
//
// CPU backend: on another backend the constructor throws one hw::Error naming what is missing.
// The matrices (QKV, output, MLP, LM head) are read as fp32 from the model (the layer matrices in
// its [in, out] layout, or re-laid [out, in]: Fp32Layout below), or as 16-bit copies
// (WeightPrecision bf16/fp16: rounded once from fp32, stored [out, in], widened to fp32 in
// registers: kernels/gemv.hpp); norms, biases and embeddings stay fp32. The KV cache holds its
// K/V rows in fp32 or 16 bits (KvPrecision, kv_cache.hpp): a 16-bit cache rounds each row once
// when it is written, and a row attends to its own K/V (and a prefill chunk's rows to the chunk's)
// in fp32, as they come from the QKV product. Every buffer (cache, chunk activations, per-thread
// attention scratch) is allocated by the constructor; prefill and step allocate nothing.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headwise/attention/kv_cache.hpp"
#include "headwise/kernels/gemv.hpp"
#include "headwise/model/model.hpp"

namespace hw::infer {

enum class WeightPrecision { FP32, BF16, FP16 };
// "fp32" | "bf16" | "fp16" (else one hw::Error naming the value); and back.
WeightPrecision parse_weight_precision(const std::string& s);
const char* weight_precision_name(WeightPrecision p);
// The KV cache precision `--kv-cache` defaults to: fp32 with fp32 weights (decoding equals the
// full forward bit for bit, as before), fp16 with 16-bit weights (llama.cpp's default cache: 10
// mantissa bits against bf16's 7; a value beyond 65504 is one error naming bf16 and fp32).
// `given` (a --kv-cache value) overrides it when not empty.
attn::KvPrecision kv_precision_for(WeightPrecision w, const std::string& given);

// The layout of the model's fp32 decoder matrices (per layer QKV, output, MLP in and out) that a
// CachedDecoder reads: the model's own [in, out], or [out, in], re-laid in place by relay_out_in
// (load_for_decoding does, for fp32 decoding). [out, in] makes every output one contiguous dot
// product, which gemv.hpp's dot_rows_f32 streams 7-15% faster than OpenBLAS's GEMV reads [in,
// out] (Qwen2.5-0.5B's matrices, bench_gemv); the model itself then computes garbage: use it only
// through a CachedDecoder built with Fp32Layout::OutIn.
enum class Fp32Layout { InOut, OutIn };

// If `name` is one of a decode step's layer matrices of `model` (its parameter name), its fan-in
// and fan-out; else false. (The LM head is [out, in] already: not one of them.)
bool decoder_layer_matrix(const Model<float>& model, const std::string& name, int64_t* in, int64_t* out);
// If `name` is one of those matrices, transpose `values` (its [in, out] values, in place, with a
// scratch copy of one matrix) to [out, in] and return true.
bool relay_out_in(const Model<float>& model, const std::string& name, float* values);

// The matrices a decode step reads, in 16 bits ([out, in], rounded once from fp32): per layer
// QKV, output, MLP in and out; the LM head (wte when tied).
struct HalfLayer {
  cpu::HalfMatrix attn, proj, fc, fcp;
};
struct HalfWeights {
  std::vector<HalfLayer> layers;
  cpu::HalfMatrix head;
  // One storage for all of them (huge pages for every matrix), laid out at the first take: the
  // head, then each layer's four, at 64-byte boundaries (offsets in values).
  cpu::HalfStorage pool;
  std::vector<int64_t> offsets;
  bool empty() const { return layers.empty(); }
  // If `name` is one of those matrices of `model` (its parameter name), round `values` (its fp32
  // values in the model's layout) into its slot and return true.
  bool take(const Model<float>& model, WeightPrecision p, const std::string& name, const float* values);
};

class CachedForward;

// The checks every cached decoder makes of the model and its options (one hw::Error naming
// what is wrong): CPU backend, max_context in 1..block_size, chunk and split_cols >= 1, no LoRA
// adapters (merge them), no linearization baseline heads, Fp32Layout::OutIn only with fp32.
void check_decodable(const Model<float>& model, int64_t max_context, int64_t chunk, int64_t split_cols,
                     WeightPrecision weights, Fp32Layout layout);

class CachedDecoder {
 public:
  // max_context: positions the cache holds (<= the model's block_size); chunk: rows per prefill
  // pass (>= 1); split_cols: a decode step's softmax-family heads run as parts of this many
  // keys (>= 1) spread over the threads and merged by log-sum-exp, so that long (full) and short
  // (streaming) heads load the threads evenly.
  // weights: the precision the matrices are read in (fp32: the model's own, no copy); half: their
  // 16-bit copies made while loading (load_for_decoding.hpp; the model's fp32 matrices may then
  // be discarded), or empty: rounded from the model here.
  // kv: the precision of the cache's K/V rows. layout: where the fp32 layer matrices are read
  // (fp32 weights), the layout they are in (Fp32Layout above).
  CachedDecoder(const Model<float>& model, int64_t max_context, int64_t chunk = 64, int64_t split_cols = 512,
          WeightPrecision weights = WeightPrecision::FP32, HalfWeights half = {},
          attn::KvPrecision kv = attn::KvPrecision::FP32, Fp32Layout layout = Fp32Layout::InOut);
  ~CachedDecoder();
  CachedDecoder(const CachedDecoder&) = delete;
  CachedDecoder& operator=(const CachedDecoder&) = delete;

  void reset() { cache_.reset(); }
  int64_t position() const { return cache_.length(); }  // tokens consumed so far
  int64_t max_context() const { return cache_.max_context(); }
  int vocab_size() const;

  // Feed n tokens at positions position() .. position() + n - 1; returns the logits of the last
  // one (vocab floats, valid until the next call). With all_logits (n x vocab) every row's logits
  // are written too. Throws hw::Error for a token outside the vocabulary or past max_context.
  const float* prefill(const int32_t* tokens, int64_t n, float* all_logits = nullptr);
  // One token: prefill of one row.
  const float* step(int32_t token) { return prefill(&token, 1); }

  const attn::KvCache& cache() const { return cache_; }
  // Bytes the decoder allocated besides the model's weights: the KV cache plus its scratch.
  size_t kv_bytes() const { return cache_.bytes(); }
  size_t scratch_bytes() const;
  // Bytes of the matrices one decode step reads (each once), in the precision it reads them.
  size_t weight_bytes_per_token() const;
  // Bytes of the 16-bit copies (0 for fp32).
  size_t half_weight_bytes() const;

 private:
  attn::KvCache cache_;
  int64_t chunk_ = 0;
  std::unique_ptr<CachedForward> forward_;  // the layer sequence over the cache (cached_forward.hpp)
  std::vector<float> last_;                 // the last row's logits
};

}  // namespace hw::infer

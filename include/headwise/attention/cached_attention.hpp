#pragma once
// The attention of cached decoding: rows at the next positions of one or more sequences, each
// with its own KV cache (kv_cache.hpp), through the layer's plan. The rows of a sequence at
// positions c0 .. c0+n-1 read its cache as it was before them (positions < c0) and their own
// K/V from the QKV rows; then their K/V (and a linear head's prefix state) go into the cache.
// A ring row overwritten by the rows was never needed by them (row i >= c0 needs (i - W, c0) of
// the cache, which the ring still holds at c0). Each kind's cached step is its math's:
// visibility from tiles::key_visible / key_intervals, a static head's weight from static_weight,
// a linear head's features from quad_features / quad_query_weights (src/attention/).
//
// A single row of a sequence (a decode step) splits each softmax-family head's columns into
// parts of split_cols keys, run in parallel and merged by their maxima and sums; several rows (a
// prefill chunk) run each head whole with GEMMs. Scratch is sized once: nothing is allocated in
// run().
#include <cstdint>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "headwise/attention/kv_cache.hpp"

namespace hw::attn {

// Rows [row0, row0 + n) of a layer's QKV (and output), the next n positions of `cache`.
struct CachedRows {
  KvCache* cache = nullptr;
  int64_t row0 = 0, n = 0;
};

class CachedAttention {
 public:
  // plan, layouts and each layer's head parameters (static patterns read in place; linear
  // kernels turned into query-side weights once) of the model; like: a cache of the shape every
  // run() will pass (sizes the scratch); max_rows: rows of one sequence per run (the prefill
  // chunk); max_seqs: sequences per run; threads: the OpenMP threads run() uses.
  CachedAttention(const HeadPlan& plan, const std::vector<LayerLayout>& layouts,
                  const std::vector<const LayerHeadParams<float>*>& params, const KvCache& like, int64_t max_rows,
                  int max_seqs, int64_t split_cols, int threads);

  // Layer l's attention of every sequence's rows: qkv rows (ldx = layout.qkv_width()) in,
  // att rows (ldo = layout.out_width()) out; then the rows are written into the caches (which
  // the caller advances after the last layer). Throws hw::Error on a linear head's
  // non-positive denominator or an fp16 cache's overflow.
  void run(int l, const CachedRows* seqs, int n_seqs, const float* qkv, float* att);

  size_t scratch_bytes() const;
  int threads() const { return threads_; }

 private:
  // One task of a layer: a softmax-family head's virtual columns [lo, hi) (its cache segments,
  // then the row's own key) of a decode step, written as part `part` of the split buffers; or
  // a whole head (static; or softmax-family over several rows, part = -1); or a KV head's
  // linear state (h = -(g + 1)); of sequence `seq`.
  struct Task {
    int seq = 0;
    int h = 0;
    int part = -1;
    int64_t lo = 0, hi = 0;
  };
  int segments(int l, int h, const KvCache& cache, int64_t c0, int64_t seg[2][2]) const;
  void decode_part(int l, int h, const KvCache& cache, int64_t c0, const float* qkv, int part, int64_t lo,
                   int64_t hi, float* S, int64_t* cp);
  void whole_head(int l, int h, const KvCache& cache, int64_t c0, int64_t n, const float* qkv, float* att, int tid);
  void linear_rows(int l, int g, KvCache& cache, int64_t n, const float* qkv, float* att, int tid, int* failed);
  void store_rows(int l, KvCache& cache, int64_t c0, int64_t n, const float* qkv);

  const HeadPlan& plan_;
  const std::vector<LayerLayout>& layouts_;
  int H_ = 0, KV_ = 0, D_ = 0;
  int64_t Fw_ = 0, max_rows_ = 0, max_cols_ = 0, max_slots_ = 0, split_cols_ = 0;
  int threads_ = 1;
  std::vector<std::vector<StaticHeadParams<float>>> statics_;  // [l][h]
  std::vector<std::vector<std::vector<float>>> linear_w_;     // [l][h]: quad_query_weights
  // per-thread scratch: scores [max_rows x max_cols], column positions, features, sums, rows
  // of a 16-bit cache widened for a prefill's products
  std::vector<float> scores_, psi_, acc_, rowsum_, widened_;
  std::vector<int64_t> colpos_;
  std::vector<Task> tasks_;  // capacity fixed at construction
  std::vector<float> part_out_, part_max_, part_sum_;
  std::vector<int> head_part0_, head_parts_;  // [seq * H + h]
};

}  // namespace hw::attn

// Cached decoding's attention (cached_attention.hpp): the task list, the parallel region, the
// merge of a decode step's parts and the writes into the caches. The per-kind math comes from
// the kinds' own files: visibility (tiles::key_visible, key_intervals), static_weight
// (head_kernels.hpp), the linear state (linear_head.cpp, quad_state.hpp).
#include "headwise/attention/cached_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention/head_kernels.hpp"
#include "attention/quad_state.hpp"
#include "attention/tile_ops.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/kernels/kv_rows.hpp"

namespace hw::attn {

using detail::exp_or_zero;
using detail::gemm_rm;

CachedAttention::CachedAttention(const HeadPlan& plan, const std::vector<LayerLayout>& layouts,
                                 const std::vector<const LayerHeadParams<float>*>& params, const KvCache& like,
                                 int64_t max_rows, int max_seqs, int64_t split_cols, int threads)
    : plan_(plan), layouts_(layouts) {
  const int L = like.n_layer();
  check(int(plan.layers.size()) == L && int(layouts.size()) == L && int(params.size()) == L,
        "cached attention: the plan, layouts, head parameters and cache disagree on the layers");
  check(max_rows >= 1 && max_seqs >= 1 && split_cols >= 1 && threads >= 1, "cached attention: bad sizes");
  H_ = L > 0 ? int(plan.layers[0].size()) : 0;
  KV_ = like.n_kv_head();
  D_ = like.head_dim();
  Fw_ = linear_features(D_);
  max_rows_ = max_rows;
  split_cols_ = split_cols;
  threads_ = threads;
  statics_.resize(size_t(L));
  linear_w_.resize(size_t(L));
  for (int l = 0; l < L; ++l) {
    statics_[size_t(l)].resize(size_t(H_));
    linear_w_[size_t(l)].resize(size_t(H_));
    for (int h = 0; h < H_; ++h) {
      const HeadSpec& spec = plan.layers[size_t(l)][size_t(h)];
      if (spec.kind == HeadKind::Static) {
        statics_[size_t(l)][size_t(h)] = params[size_t(l)]->statics[size_t(h)];
      } else if (spec.kind == HeadKind::Linear) {
        const LinearHeadParams<float>& p = params[size_t(l)]->linears[size_t(h)];
        // The model checked its groups when it set them; they index L here, so again (a buffer
        // changed since is refused by name, not indexed), and G <= head_dim bounds the O(G^3).
        check_linear_groups(p.groups, D_, p.n_groups,
                            "decoder: layer " + std::to_string(l) + " linear head " + std::to_string(h));
        std::vector<float> M(size_t((p.n_groups + 1) * (p.n_groups + 1)));
        auto& w = linear_w_[size_t(l)][size_t(h)];
        w.resize(size_t(Fw_));
        detail::quad_query_weights(detail::linear_kernel(p, params[size_t(l)]->linear_eps, D_), D_, M.data(),
                                   w.data());
      }
    }
    for (int g = 0; g < KV_; ++g) max_slots_ = std::max(max_slots_, like.policy(l, g).slots);
  }
  max_cols_ = max_slots_ + max_rows_;
  const auto T = size_t(threads_);
  scores_.resize(T * size_t(max_rows_) * size_t(max_cols_));
  colpos_.resize(T * size_t(max_cols_));
  psi_.resize(T * size_t(Fw_));
  acc_.resize(T * size_t(std::max<int64_t>(Fw_, D_ + 1)));  // (also linear_state_add's features)
  rowsum_.resize(T * size_t(max_rows_));
  if (like.half()) widened_.resize(T * size_t(max_slots_) * size_t(D_));
  const int64_t parts_per_seq = int64_t(H_) * ((max_slots_ + 1 + split_cols - 1) / split_cols);
  tasks_.reserve(size_t(max_seqs) * size_t(parts_per_seq + H_ + KV_));
  part_out_.resize(size_t(max_seqs * parts_per_seq * D_));
  part_max_.resize(size_t(max_seqs * parts_per_seq));
  part_sum_.resize(size_t(max_seqs * parts_per_seq));
  head_part0_.resize(size_t(max_seqs) * size_t(H_));
  head_parts_.resize(size_t(max_seqs) * size_t(H_));
}

size_t CachedAttention::scratch_bytes() const {
  size_t f = 0;
  for (const auto* v : {&scores_, &psi_, &acc_, &rowsum_, &widened_, &part_out_, &part_max_, &part_sum_})
    f += v->size();
  return f * sizeof(float) + colpos_.size() * sizeof(int64_t);
}

// The cache slots head h reads at length c0, as at most two slot ranges: every valid slot,
// except a window head on an All store (slot = position), which reads only its key set's reach.
int CachedAttention::segments(int l, int h, const KvCache& cache, int64_t c0, int64_t seg[2][2]) const {
  const HeadSpec& spec = plan_.layers[size_t(l)][size_t(h)];
  const int g = h / (H_ / KV_);
  int n = 0;
  auto add = [&](int64_t lo, int64_t hi) {
    if (hi > lo) seg[n][0] = lo, seg[n][1] = hi, ++n;
  };
  if (cache.policy(l, g).rows == KvRows::SinkRing || spec.kind == HeadKind::Static || spec.kind == HeadKind::Softmax) {
    add(0, cache.valid_slots(l, g, c0));
  } else {
    int64_t iv[2][2];
    const int k = tiles::key_intervals(detail::key_set(spec, c0), c0, c0, iv);
    for (int i = 0; i < k; ++i) add(iv[i][0], iv[i][1]);
  }
  return n;
}

// One part of a decode step's softmax-family head: virtual columns [lo, hi) of its cache
// segments followed by the row's own key. Writes the part's max, sum of e^(s - max) and
// unnormalised output sum e^(s - max) v.
void CachedAttention::decode_part(int l, int h, const KvCache& cache, int64_t c0, const float* qkv, int part,
                                  int64_t lo, int64_t hi, float* S, int64_t* cp) {
  const auto& lay = layouts_[size_t(l)];
  const HeadSpec& spec = plan_.layers[size_t(l)][size_t(h)];
  const int D = D_, g = h / (H_ / KV_);
  const int64_t len = hi - lo;
  const float scale = 1.f / std::sqrt(float(D));
  const float* q = qkv + lay.q_col(h);
  const bool bounded = spec.kind != HeadKind::Softmax;
  int64_t seg[2][2];
  const int n_seg = segments(l, h, cache, c0, seg);
  // Scores of the cached keys in [lo, hi), piece by piece (a part may straddle two segments).
  int64_t voff = 0;
  for (int s = 0; s < n_seg; ++s) {
    const int64_t seg_len = seg[s][1] - seg[s][0];
    const int64_t a = std::max(lo, voff), b = std::min(hi, voff + seg_len);
    if (a < b) {
      const int64_t slot0 = seg[s][0] + (a - voff);
      if (cache.half())
        cpu::kv_dot_rows(S + (a - lo), q, cache.k_row16(l, g, slot0), b - a, D, cache.half_type(), scale);
      else
        cpu::kv_dot_rows(S + (a - lo), q, cache.k_row(l, g, slot0), b - a, D, scale);
      if (bounded)
        for (int64_t c = a; c < b; ++c) cp[c - lo] = cache.position_of(l, g, slot0 + (c - a), c0);
    }
    voff += seg_len;
  }
  const bool own = hi == voff + 1;  // the last column is the row's own key
  if (own) {
    const float* k = qkv + lay.k_col(g);
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot += q[d] * k[d];
    S[len - 1] = scale * dot;
    cp[len - 1] = c0;
  }
  // Mask (a bounded head sees only its key set), max, e^(s - max).
  float mx = -std::numeric_limits<float>::infinity();
  if (bounded) {
    const detail::KeySet ks = detail::key_set(spec, c0 + 1);
    for (int64_t c = 0; c < len; ++c) {
      if (tiles::key_visible(ks, c0, cp[c])) mx = std::max(mx, S[c]);
      else S[c] = -std::numeric_limits<float>::infinity();
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < len; ++c) mx = std::max(mx, S[c]);
  }
  float* o = part_out_.data() + size_t(part) * size_t(D);
  part_max_[size_t(part)] = mx;
  if (mx == -std::numeric_limits<float>::infinity()) {  // nothing visible in this part
    part_sum_[size_t(part)] = 0.f;
    return;
  }
  // (Vectorized: a step over 8K keys computes ~1.2M of these exps, as many as it reads values.)
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < len; ++c) {
    const float p = exp_or_zero(S[c] - mx);
    S[c] = p;
    sum += p;
  }
  part_sum_[size_t(part)] = sum;
  // o = sum_c p_c v_c over the same pieces.
  std::fill(o, o + D, 0.f);
  voff = 0;
  for (int s = 0; s < n_seg; ++s) {
    const int64_t seg_len = seg[s][1] - seg[s][0];
    const int64_t a = std::max(lo, voff), b = std::min(hi, voff + seg_len);
    const int64_t slot0 = seg[s][0] + (a - voff);
    if (a < b && cache.half())
      cpu::kv_axpy_rows(o, S + (a - lo), cache.v_row16(l, g, slot0), b - a, D, cache.half_type());
    else if (a < b)
      cpu::kv_axpy_rows(o, S + (a - lo), cache.v_row(l, g, slot0), b - a, D);
    voff += seg_len;
  }
  if (own) {
    const float* v = qkv + lay.v_col(g);
    const float p = S[len - 1];
    for (int d = 0; d < D; ++d) o[d] += p * v[d];
  }
}

// A whole static or softmax-family head over n rows (a prefill chunk): scores of the cache
// segments and of the rows' own keys by GEMMs, masked and normalised row by row, then P V.
void CachedAttention::whole_head(int l, int h, const KvCache& cache, int64_t c0, int64_t n, const float* qkv,
                                 float* att, int tid) {
  const auto& lay = layouts_[size_t(l)];
  const HeadSpec& spec = plan_.layers[size_t(l)][size_t(h)];
  const int D = D_, g = h / (H_ / KV_);
  const int64_t ldx = lay.qkv_width(), ldo = lay.out_width(), ldS = max_cols_;
  const float scale = 1.f / std::sqrt(float(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float* S = scores_.data() + size_t(tid) * size_t(max_rows_) * size_t(ldS);
  int64_t* cp = colpos_.data() + size_t(tid) * size_t(ldS);
  float* rowsum = rowsum_.data() + size_t(tid) * size_t(max_rows_);
  // fp32 rows [slot0, slot0 + len) of K or V: the cache's own, or a 16-bit cache's widened into
  // this thread's scratch (an fp32 cache has none: no pointer into an empty buffer, which UBSan
  // reports as an offset applied to null).
  float* widened = cache.half() ? widened_.data() + size_t(tid) * size_t(max_slots_) * size_t(D) : nullptr;
  auto cache_rows = [&](bool k, int64_t slot0, int64_t len) -> const float* {
    if (!cache.half()) return k ? cache.k_row(l, g, slot0) : cache.v_row(l, g, slot0);
    cpu::kv_widen_rows(widened, k ? cache.k_row16(l, g, slot0) : cache.v_row16(l, g, slot0), len * D,
                       cache.half_type());
    return widened;
  };
  const bool is_static = spec.kind == HeadKind::Static;
  int64_t seg[2][2];
  const int n_seg = segments(l, h, cache, c0, seg);
  int64_t ncols = 0;
  for (int s = 0; s < n_seg; ++s)
    for (int64_t sl = seg[s][0]; sl < seg[s][1]; ++sl) cp[ncols++] = cache.position_of(l, g, sl, c0);
  const int64_t cache_cols = ncols;
  for (int64_t r = 0; r < n; ++r) cp[ncols++] = c0 + r;
  float* out = att + lay.out_col(h);
  if (is_static) {  // already normalised
    const StaticHeadParams<float>& sw = statics_[size_t(l)][size_t(h)];
    for (int64_t r = 0; r < n; ++r) {
      float* row = S + r * ldS;
      for (int64_t c = 0; c < ncols; ++c) row[c] = detail::static_weight(sw, c0 + r, cp[c]);
      rowsum[r] = 1.f;
    }
  } else {
    const float* q = qkv + lay.q_col(h);
    int64_t off = 0;
    for (int s = 0; s < n_seg; ++s) {
      const int64_t len = seg[s][1] - seg[s][0];
      gemm_rm(false, true, int(n), int(len), D, scale, q, ldx, cache_rows(true, seg[s][0], len), D, 0.f, S + off,
              ldS);
      off += len;
    }
    gemm_rm(false, true, int(n), int(n), D, scale, q, ldx, qkv + lay.k_col(g), ldx, 0.f, S + cache_cols, ldS);
    const detail::KeySet ks = detail::key_set(spec, c0 + n);
    for (int64_t r = 0; r < n; ++r) {
      float* row = S + r * ldS;
      float mx = neg_inf;
      for (int64_t c = 0; c < ncols; ++c) {
        if (tiles::key_visible(ks, c0 + r, cp[c])) mx = std::max(mx, row[c]);
        else row[c] = neg_inf;
      }
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < ncols; ++c) {
        const float p = exp_or_zero(row[c] - mx);  // masked: -inf -> 0
        row[c] = p;
        sum += p;
      }
      rowsum[r] = sum;
    }
  }
  // out = P V over the same columns: the cache segments, then the rows' own V.
  int64_t off = 0;
  float beta = 0.f;
  for (int s = 0; s < n_seg; ++s) {
    const int64_t len = seg[s][1] - seg[s][0];
    gemm_rm(false, false, int(n), D, int(len), 1.f, S + off, ldS, cache_rows(false, seg[s][0], len), D, beta, out,
            ldo);
    off += len;
    beta = 1.f;
  }
  gemm_rm(false, false, int(n), D, int(n), 1.f, S + cache_cols, ldS, qkv + lay.v_col(g), ldx, beta, out, ldo);
  if (!is_static)
    for (int64_t r = 0; r < n; ++r) {
      const float inv = 1.f / rowsum[r];
      float* o = out + r * ldo;
      for (int d = 0; d < D; ++d) o[d] *= inv;
    }
}

// The linear query heads of KV head g: each row is added to the prefix state, then read.
void CachedAttention::linear_rows(int l, int g, KvCache& cache, int64_t n, const float* qkv, float* att, int tid,
                                  int* failed) {
  const auto& lay = layouts_[size_t(l)];
  const auto& plan = plan_.layers[size_t(l)];
  const int per = H_ / KV_;
  const int64_t ldx = lay.qkv_width(), ldo = lay.out_width();
  float* St = cache.linear_state(l, g);
  float* psi = psi_.data() + size_t(tid) * size_t(Fw_);
  float* acc = acc_.data() + size_t(tid) * size_t(std::max<int64_t>(Fw_, D_ + 1));
  for (int64_t r = 0; r < n; ++r) {
    detail::linear_state_add(St, qkv + r * ldx + lay.k_col(g), qkv + r * ldx + lay.v_col(g), D_, acc);
    for (int h = g * per; h < (g + 1) * per; ++h) {
      if (plan[size_t(h)].kind != HeadKind::Linear) continue;
      if (!detail::linear_state_read(St, linear_w_[size_t(l)][size_t(h)].data(), qkv + r * ldx + lay.q_col(h), D_,
                                     psi, acc, att + r * ldo + lay.out_col(h))) {
#pragma omp atomic write
        *failed = 1;
      }
    }
  }
}

// The rows' K/V into the cache, at their original positions.
void CachedAttention::store_rows(int l, KvCache& cache, int64_t c0, int64_t n, const float* qkv) {
  const auto& lay = layouts_[size_t(l)];
  const int64_t ldx = lay.qkv_width();
  const int D = D_;
  for (int g = 0; g < KV_; ++g) {
    const KvHeadPolicy& pol = cache.policy(l, g);
    if (!pol.has_k && !pol.has_v) continue;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t slot = cache.slot_of(l, g, c0 + r);
      const float* row = qkv + r * ldx;
      if (cache.half()) {
        const cpu::HalfType ht = cache.half_type();
        const bool ok = (!pol.has_k || cpu::kv_store_row(cache.k_row16(l, g, slot), row + lay.k_col(g), D, ht)) &&
                        (!pol.has_v || cpu::kv_store_row(cache.v_row16(l, g, slot), row + lay.v_col(g), D, ht));
        if (!ok)
          fail("decoder: layer " + std::to_string(l) + " KV head " + std::to_string(g) + " at position " +
               std::to_string(c0 + r) + " has a K or V value beyond fp16's range (65504): use --kv-cache bf16 or fp32");
        continue;
      }
      if (pol.has_k) std::copy(row + lay.k_col(g), row + lay.k_col(g) + D, cache.k_row(l, g, slot));
      if (pol.has_v) std::copy(row + lay.v_col(g), row + lay.v_col(g) + D, cache.v_row(l, g, slot));
    }
  }
}

void CachedAttention::run(int l, const CachedRows* seqs, int n_seqs, const float* qkv, float* att) {
  const auto& lay = layouts_[size_t(l)];
  const auto& plan = plan_.layers[size_t(l)];
  const int D = D_;
  const int64_t ldx = lay.qkv_width(), ldo = lay.out_width();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Tasks of each sequence: each static query head; each softmax-family query head, whole over
  // several rows and in parts of split_cols columns for one row; each KV head with a linear
  // state (its linear query heads run row by row with the state). The capacity is fixed.
  tasks_.clear();
  int n_parts = 0;
  for (int s = 0; s < n_seqs; ++s) {
    const CachedRows& sq = seqs[s];
    const int64_t c0 = sq.cache->length();
    const bool split = sq.n == 1;
    for (int h = 0; h < H_; ++h) {
      const HeadSpec& spec = plan[size_t(h)];
      if (split && spec.softmax_family()) {
        int64_t seg[2][2];
        const int n_seg = segments(l, h, *sq.cache, c0, seg);
        int64_t ncols = 1;  // the row's own key
        for (int i = 0; i < n_seg; ++i) ncols += seg[i][1] - seg[i][0];
        head_part0_[size_t(s * H_ + h)] = n_parts;
        head_parts_[size_t(s * H_ + h)] = int((ncols + split_cols_ - 1) / split_cols_);
        for (int64_t lo = 0; lo < ncols; lo += split_cols_)
          tasks_.push_back({s, h, n_parts++, lo, std::min(ncols, lo + split_cols_)});
      } else if (spec.softmax_family() || spec.kind == HeadKind::Static) {
        tasks_.push_back({s, h, -1, 0, 0});
      }
    }
    for (int g = 0; g < KV_; ++g)
      if (sq.cache->policy(l, g).linear_state) tasks_.push_back({s, -(g + 1), -1, 0, 0});
  }
  const int n_tasks = int(tasks_.size());
  int failed = 0;
  ParallelErrors errors;
  {
    const detail::BlasSingleThreaded blas_on_calling_thread;  // tasks are the parallel dimension
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_) if (n_tasks > 1)
    for (int t = 0; t < n_tasks; ++t) errors.run([&] {
      const int tid = omp_get_thread_num();
      const Task task = tasks_[size_t(t)];
      const CachedRows& sq = seqs[task.seq];
      const int64_t c0 = sq.cache->length();
      const float* q = qkv + sq.row0 * ldx;
      float* o = att + sq.row0 * ldo;
      if (task.part >= 0) {
        float* S = scores_.data() + size_t(tid) * size_t(max_rows_) * size_t(max_cols_);
        int64_t* cp = colpos_.data() + size_t(tid) * size_t(max_cols_);
        decode_part(l, task.h, *sq.cache, c0, q, task.part, task.lo, task.hi, S, cp);
      } else if (task.h >= 0) {
        whole_head(l, task.h, *sq.cache, c0, sq.n, q, o, tid);
      } else {
        linear_rows(l, -task.h - 1, *sq.cache, sq.n, q, o, tid, &failed);
      }
    });
  }
  errors.rethrow();
  // Merge each split head's parts in part order: out = sum_p e^(m_p - M) o_p / sum_p e^(m_p - M) s_p.
  for (int s = 0; s < n_seqs; ++s) {
    if (seqs[s].n != 1) continue;
    float* att_row = att + seqs[s].row0 * ldo;
    for (int h = 0; h < H_; ++h) {
      if (!plan[size_t(h)].softmax_family()) continue;
      const int p0 = head_part0_[size_t(s * H_ + h)], np = head_parts_[size_t(s * H_ + h)];
      float M = neg_inf;
      for (int p = p0; p < p0 + np; ++p) M = std::max(M, part_max_[size_t(p)]);
      float* out = att_row + lay.out_col(h);
      std::fill(out, out + D, 0.f);
      float den = 0.f;
      for (int p = p0; p < p0 + np; ++p) {
        const float w = exp_or_zero(part_max_[size_t(p)] - M);  // a part with no visible key: 0
        if (w == 0.f) continue;
        den += w * part_sum_[size_t(p)];
        const float* po = part_out_.data() + size_t(p) * size_t(D);
        for (int d = 0; d < D; ++d) out[d] += w * po[d];
      }
      const float inv = 1.f / den;  // den >= 1: the row's own key is always visible
      for (int d = 0; d < D; ++d) out[d] *= inv;
    }
  }
  if (failed)
    fail("decoder: a linear head of layer " + std::to_string(l) +
         " has a non-positive or non-finite denominator (as the training forward would report)");
  for (int s = 0; s < n_seqs; ++s)
    store_rows(l, *seqs[s].cache, seqs[s].cache->length(), seqs[s].n, qkv + seqs[s].row0 * ldx);
}

}  // namespace hw::attn

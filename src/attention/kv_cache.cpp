#include "headwise/attention/kv_cache.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "headwise/core/error.hpp"
#include "headwise/core/host_pages.hpp"

namespace hw::attn {

int64_t linear_features(int D) { return 1 + int64_t(D) + int64_t(D) * (D + 1) / 2; }

std::vector<KvHeadPolicy> kv_layer_policies(const attn::LayerPlan& plan, int n_head, int n_kv_head,
                                         int64_t max_context) {
  using attn::HeadKind;
  check(n_kv_head >= 1 && n_head % n_kv_head == 0, "kv cache: n_kv_head must divide n_head");
  check(int(plan.size()) == n_head, "kv cache: the layer plan has " + std::to_string(plan.size()) +
                                        " heads, the model " + std::to_string(n_head));
  const int per = n_head / n_kv_head;
  std::vector<KvHeadPolicy> out(static_cast<size_t>(n_kv_head));
  for (int g = 0; g < n_kv_head; ++g) {
    KvHeadPolicy& p = out[size_t(g)];
    bool all = false, ring = false;
    for (int h = g * per; h < (g + 1) * per; ++h) {
      const attn::HeadSpec& s = plan[size_t(h)];
      if (s.softmax_family()) p.has_k = true;
      if (s.kind == HeadKind::Softmax || s.kind == HeadKind::Static) all = true;
      if (s.kind == HeadKind::Window || s.kind == HeadKind::SinkWindow) {
        ring = true;
        p.window = std::max<int64_t>(p.window, s.window);
        if (s.kind == HeadKind::SinkWindow) p.sink = std::max<int64_t>(p.sink, s.sink);
      }
      if (s.kind == HeadKind::Linear) p.linear_state = true;
    }
    if (!all && ring && p.sink + p.window < max_context) {
      p.rows = KvRows::SinkRing;
      p.slots = p.sink + p.window;
    } else if (all || ring) {
      p.rows = KvRows::All;
      p.slots = max_context;
    }
    if (p.rows != KvRows::SinkRing) p.sink = p.window = 0;
    p.has_v = p.rows != KvRows::None;
    if (p.rows == KvRows::None) p.has_k = false;
  }
  return out;
}

KvPrecision parse_kv_precision(const std::string& s) {
  if (s == "fp32") return KvPrecision::FP32;
  if (s == "bf16") return KvPrecision::BF16;
  if (s == "fp16") return KvPrecision::FP16;
  fail("--kv-cache: '" + s + "' is not a KV cache precision (fp32, bf16 or fp16)");
}

const char* kv_precision_name(KvPrecision p) {
  return p == KvPrecision::FP32 ? "fp32" : p == KvPrecision::BF16 ? "bf16" : "fp16";
}

std::vector<std::vector<KvHeadPolicy>> KvCache::policies_for(const HeadPlan& plan, int n_head, int n_kv_head,
                                                              int head_dim, int64_t max_context) {
  check(max_context >= 1, "kv cache: max_context must be >= 1");
  check(head_dim >= 1, "kv cache: head_dim must be >= 1");
  std::vector<std::vector<KvHeadPolicy>> out;
  for (const auto& layer : plan.layers) out.push_back(kv_layer_policies(layer, n_head, n_kv_head, max_context));
  return out;
}

KvCache::Counts KvCache::counts(const std::vector<std::vector<KvHeadPolicy>>& policies, int head_dim) {
  const size_t lin = size_t(linear_features(head_dim)) * size_t(head_dim + 1);
  Counts c;
  for (const auto& layer : policies)
    for (const auto& p : layer) {
      c.rows += size_t(p.slots) * size_t(head_dim) * (size_t(p.has_k) + size_t(p.has_v));
      c.linear += p.linear_state ? lin : 0;
    }
  return c;
}

size_t KvCache::bytes_for(const HeadPlan& plan, int n_head, int n_kv_head, int head_dim, int64_t max_context,
                          KvPrecision rows) {
  const Counts c = counts(policies_for(plan, n_head, n_kv_head, head_dim, max_context), head_dim);
  return c.linear * sizeof(float) + c.rows * (rows == KvPrecision::FP32 ? sizeof(float) : sizeof(uint16_t));
}

KvCache::KvCache(const attn::HeadPlan& plan, int n_head, int n_kv_head, int head_dim, int64_t max_context,
                 KvPrecision rows)
    : n_kv_head_(n_kv_head), D_(head_dim), max_context_(max_context), precision_(rows) {
  policies_ = policies_for(plan, n_head, n_kv_head, head_dim, max_context);
  const int64_t lin = linear_features(D_) * (D_ + 1);
  const Counts n = counts(policies_, D_);
  const size_t rows_total = n.rows, lin_total = n.linear;
  const size_t f32_total = lin_total + (half() ? 0 : rows_total);
  // Both blocks are read once per decode step: on huge pages between reserve and the first write.
  values_.reserve(f32_total);
  advise_huge_pages(values_.data(), f32_total * sizeof(float));
  values_.assign(f32_total, 0.f);
  if (half()) {
    half_.reserve(rows_total);
    advise_huge_pages(half_.data(), rows_total * sizeof(uint16_t));
    half_.assign(rows_total, 0);
  }
  float* at = values_.data();
  uint16_t* at16 = half_.data();
  for (const auto& layer : policies_)
    for (const auto& p : layer) {
      float *k = nullptr, *v = nullptr, *s = nullptr;
      uint16_t *k16 = nullptr, *v16 = nullptr;
      if (half()) {
        if (p.has_k) k16 = std::exchange(at16, at16 + p.slots * D_);
        if (p.has_v) v16 = std::exchange(at16, at16 + p.slots * D_);
      } else {
        if (p.has_k) k = std::exchange(at, at + p.slots * D_);
        if (p.has_v) v = std::exchange(at, at + p.slots * D_);
      }
      if (p.linear_state) s = std::exchange(at, at + lin);
      k_.push_back(k);
      v_.push_back(v);
      k16_.push_back(k16);
      v16_.push_back(v16);
      lin_.push_back(s);
    }
}

void KvCache::reset() {
  length_ = 0;
  const int64_t lin = linear_features(D_) * (D_ + 1);
  for (float* s : lin_)
    if (s) std::fill(s, s + lin, 0.f);
}

int64_t KvCache::slot_of(int l, int g, int64_t p) const {
  const KvHeadPolicy& pol = policy(l, g);
  if (pol.rows == KvRows::SinkRing && p >= pol.sink) return pol.sink + (p - pol.sink) % pol.window;
  return p;
}

int64_t KvCache::position_of(int l, int g, int64_t slot, int64_t n) const {
  const KvHeadPolicy& pol = policy(l, g);
  if (pol.rows != KvRows::SinkRing || slot < pol.sink) return slot;
  const int64_t r = slot - pol.sink;  // the latest p < n with p >= S and (p - S) mod W == r
  return pol.sink + r + pol.window * ((n - 1 - pol.sink - r) / pol.window);
}

int64_t KvCache::valid_slots(int l, int g, int64_t n) const { return std::min(n, policy(l, g).slots); }

std::vector<int64_t> KvCache::held_positions(int l, int g) const {
  std::vector<int64_t> out;
  for (int64_t s = 0; s < valid_slots(l, g, length_); ++s) out.push_back(position_of(l, g, s, length_));
  return out;
}

void KvCache::copy_from(const KvCache& other) {
  check(other.policies_.size() == policies_.size() && other.n_kv_head_ == n_kv_head_ && other.D_ == D_ &&
            other.max_context_ == max_context_ && other.precision_ == precision_ &&
            other.values_.size() == values_.size() && other.half_.size() == half_.size(),
        "KvCache::copy_from: the caches differ in shape or precision");
  for (size_t l = 0; l < policies_.size(); ++l)
    for (size_t g = 0; g < policies_[l].size(); ++g) {
      const KvHeadPolicy &a = policies_[l][g], &b = other.policies_[l][g];
      check(a.rows == b.rows && a.slots == b.slots && a.has_k == b.has_k && a.has_v == b.has_v &&
                a.linear_state == b.linear_state && a.sink == b.sink && a.window == b.window,
            "KvCache::copy_from: the caches' plans differ");
    }
  std::copy(other.values_.begin(), other.values_.end(), values_.begin());
  std::copy(other.half_.begin(), other.half_.end(), half_.begin());
  length_ = other.length_;
}

}  // namespace hw::attn

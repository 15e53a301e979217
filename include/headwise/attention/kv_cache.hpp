#pragma once
// The per-KV-head cache of cached decoding, sized once from the head plan and the maximum
// context; nothing is allocated after construction (one block holds every store).
//
// What a KV head keeps comes from the kinds of its query heads (the plan), "the most demanding
// query head decides":
//   rows (K and V rows at their original positions, keys after RoPE when pos = rope):
//     All       if some query head is softmax or static   (static: every position's V),
//     SinkRing  if the most demanding are window / sink_window: S = max sink, W = max window of
//               those heads (window:W has S = 0): S sink slots for positions 0..S-1 and a W-slot
//               ring for positions >= S (position p in slot S + (p - S) mod W); a head with a
//               smaller S or W masks by position. When S + W >= max_context nothing would ever
//               be evicted, so the store is All with max_context slots;
//     None      otherwise (only linear or pruned heads).
//   K rows exist when some query head is softmax-family (static heads need no keys); V rows when
//   rows != None.
//   linear state: when some query head is linear, the exclusive prefix sum
//     S = sum_j phi(k_j) (x) [v_j, 1], phi(k) = [1, k_r, k_r k_c (r <= c)]  (Fw = 1 + D + D(D+1)/2
//     rows of D + 1), the key side of the OAL kernel (src/attention/linear_head.cpp). phi does not
//     depend on the head's L or groups, so linear query heads of one KV head share one state.
//   pruned query heads need nothing.
// A KV head shared by a static and a streaming head therefore keeps K for every position too:
// the simple rule costs K rows the streaming head never reads (documented, not optimised).
//
// Precision: K and V rows are fp32, or bf16 / fp16 (KvPrecision: rounded to nearest even when
// written, widened when read by kernels/kv_rows.hpp; llama.cpp's default cache is fp16). Linear
// states are running sums and stay fp32.
//
// Bytes (values only; positions are implied by the slot and the length, never stored):
//   sum over (layer, KV head) of bpv * D * slots * ([has K] + [has V]) + 4 [linear] Fw (D + 1),
// bpv = 4 (fp32) or 2, slots = max_context (All) or S + W (SinkRing). For plans of softmax and
// sink_window heads only this is the formula sum_l 2 D bpv (n_full T + n_stream (S + W))
// with T = max_context.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/attention/head_plan.hpp"
#include "headwise/kernels/gemv.hpp"

namespace hw::attn {

enum class KvRows : uint8_t { None, All, SinkRing };

enum class KvPrecision { FP32, BF16, FP16 };
// "fp32" | "bf16" | "fp16" (else one hw::Error naming --kv-cache and the value); and back.
KvPrecision parse_kv_precision(const std::string& s);
const char* kv_precision_name(KvPrecision p);

struct KvHeadPolicy {
  KvRows rows = KvRows::None;
  int64_t sink = 0, window = 0;  // SinkRing only
  bool has_k = false, has_v = false;
  bool linear_state = false;
  int64_t slots = 0;  // rows held at most
};

// The policies of every KV head of one layer (see above).
std::vector<KvHeadPolicy> kv_layer_policies(const LayerPlan& plan, int n_head, int n_kv_head,
                                         int64_t max_context);
// Features of the linear-head state for head width D: 1 + D + D (D + 1) / 2.
int64_t linear_features(int D);

class KvCache {
 public:
  // plan: the model's head plan; max_context >= 1 positions; head_dim D; rows: K/V precision.
  KvCache(const HeadPlan& plan, int n_head, int n_kv_head, int head_dim, int64_t max_context,
          KvPrecision rows = KvPrecision::FP32);

  int n_layer() const { return int(policies_.size()); }
  int n_kv_head() const { return n_kv_head_; }
  int head_dim() const { return D_; }
  int64_t max_context() const { return max_context_; }
  const KvHeadPolicy& policy(int l, int g) const { return policies_[size_t(l)][size_t(g)]; }
  // Bytes of every store (the formula above) = the blocks allocated.
  size_t bytes() const { return values_.size() * sizeof(float) + half_.size() * sizeof(uint16_t); }
  // The bytes() a cache of these arguments would have, without allocating it: the one sizing rule
  // (the constructor allocates what it counts). Checks the arguments as the constructor does.
  static size_t bytes_for(const HeadPlan& plan, int n_head, int n_kv_head, int head_dim, int64_t max_context,
                          KvPrecision rows = KvPrecision::FP32);
  KvPrecision precision() const { return precision_; }
  bool half() const { return precision_ != KvPrecision::FP32; }
  cpu::HalfType half_type() const { return precision_ == KvPrecision::BF16 ? cpu::HalfType::BF16 : cpu::HalfType::F16; }

  // Positions written so far (every layer advances together: the decoder calls advance()).
  int64_t length() const { return length_; }
  void reset();  // length 0, linear states zeroed (rows are simply overwritten later)
  void advance(int64_t n) { length_ += n; }
  // This cache becomes a copy of `other` (same plan, context and precision: else hw::Error):
  // every row and state, and its length. Copies values; allocates nothing.
  void copy_from(const KvCache& other);

  // Slot of position p in a store (p < length or the one being written), and the position that
  // slot holds at length n (slot < valid_slots(n)).
  int64_t slot_of(int l, int g, int64_t p) const;
  int64_t position_of(int l, int g, int64_t slot, int64_t n) const;
  // Slots holding a position at length n: [0, valid_slots).
  int64_t valid_slots(int l, int g, int64_t n) const;

  // D-wide rows of slot s (nullptr when the store has no K / V, or holds them in the other
  // precision: k_row / v_row for fp32 rows, k_row16 / v_row16 for 16-bit ones), the linear state
  // [Fw][D + 1] (fp32 always).
  uint16_t* k_row16(int l, int g, int64_t s) { return k16_[idx(l, g)] ? k16_[idx(l, g)] + s * D_ : nullptr; }
  uint16_t* v_row16(int l, int g, int64_t s) { return v16_[idx(l, g)] ? v16_[idx(l, g)] + s * D_ : nullptr; }
  const uint16_t* k_row16(int l, int g, int64_t s) const { return k16_[idx(l, g)] ? k16_[idx(l, g)] + s * D_ : nullptr; }
  const uint16_t* v_row16(int l, int g, int64_t s) const { return v16_[idx(l, g)] ? v16_[idx(l, g)] + s * D_ : nullptr; }
  float* k_row(int l, int g, int64_t s) { return k_[idx(l, g)] ? k_[idx(l, g)] + s * D_ : nullptr; }
  float* v_row(int l, int g, int64_t s) { return v_[idx(l, g)] ? v_[idx(l, g)] + s * D_ : nullptr; }
  const float* k_row(int l, int g, int64_t s) const { return k_[idx(l, g)] ? k_[idx(l, g)] + s * D_ : nullptr; }
  const float* v_row(int l, int g, int64_t s) const { return v_[idx(l, g)] ? v_[idx(l, g)] + s * D_ : nullptr; }
  float* linear_state(int l, int g) { return lin_[idx(l, g)]; }
  const float* linear_state(int l, int g) const { return lin_[idx(l, g)]; }

  // The positions held by (l, g) at the current length, slot by slot (tests, reports).
  std::vector<int64_t> held_positions(int l, int g) const;

 private:
  size_t idx(int l, int g) const { return size_t(l) * size_t(n_kv_head_) + size_t(g); }
  // Elements of the two blocks: K/V rows (fp32 or 16-bit) and linear states (fp32).
  struct Counts {
    size_t rows = 0, linear = 0;
  };
  static Counts counts(const std::vector<std::vector<KvHeadPolicy>>& policies, int head_dim);
  static std::vector<std::vector<KvHeadPolicy>> policies_for(const HeadPlan& plan, int n_head, int n_kv_head,
                                                             int head_dim, int64_t max_context);
  int n_kv_head_ = 0, D_ = 0;
  int64_t max_context_ = 0, length_ = 0;
  std::vector<std::vector<KvHeadPolicy>> policies_;
  KvPrecision precision_ = KvPrecision::FP32;
  // every store, allocated once (on 2 MiB pages where the kernel allows): fp32 rows and linear
  // states; 16-bit rows
  std::vector<float> values_;
  std::vector<uint16_t> half_;
  std::vector<float*> k_, v_, lin_;
  std::vector<uint16_t*> k16_, v16_;
};

}  // namespace hw::attn

#pragma once
// The head plan: for each layer, the kind of every query head. Every method (SAF, AAH, AoH,
// OAL) is a planner that hands back a new plan; the model derives its parameter layout and
// the attention entry point derives its work from it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headwise/attention/head_kind.hpp"

namespace hw::attn {

// One query head's kind. Text form (config.json "head_plan"): the kind's name (head_kind.hpp's
// kind_info), with its parameters where it has them: "window:W", "sink_window:S:W",
// "performer:M" ("performer" alone: 250 features).
struct HeadSpec {
  HeadKind kind = HeadKind::Softmax;
  int32_t window = 0;    // Window, SinkWindow: keys i-W < j <= i
  int32_t sink = 0;      // SinkWindow: keys j < S
  int32_t features = 0;  // Performer: random features per head (M)

  static constexpr int32_t kPerformerFeatures = 250;  // the OAL paper's Performer baseline
  static constexpr int32_t kMaxPerformerFeatures = 8192;

  static HeadSpec parse(const std::string& text);  // throws hw::Error naming the text
  std::string str() const;
  // Why the spec is impossible ("window 0 must be >= 1", "sink -1 must be >= 0"), or "" when it
  // is valid: the one place a window's and a sink's validity is decided.
  std::string invalid_reason() const;
  bool reads_qk() const { return kind != HeadKind::Static && kind != HeadKind::Pruned; }
  bool reads_v() const { return kind != HeadKind::Pruned; }
  bool softmax_family() const {
    return kind == HeadKind::Softmax || kind == HeadKind::Window || kind == HeadKind::SinkWindow;
  }
  // The linearization baselines (OAL issue item 5): feature-map kernels with a causal prefix state.
  bool baseline_linear() const { return kind_info(kind).baseline_linear; }
  // Kinds whose row statistic is a kernel denominator (must be positive and finite).
  bool kernel_normalised() const { return kind == HeadKind::Linear || baseline_linear(); }
  bool operator==(const HeadSpec&) const = default;
};

using LayerPlan = std::vector<HeadSpec>;

struct HeadPlan {
  std::vector<LayerPlan> layers;

  static HeadPlan uniform(int n_layer, int n_head, HeadSpec spec = {});
  // Throws hw::Error if the plan's shape does not match the model or a window is < 1.
  void validate(int n_layer, int n_head) const;
  bool all_softmax() const;
  int count(HeadKind kind) const;
  nlohmann::json to_json() const;                  // [[ "softmax", "window:64", ... ], ...]
  static HeadPlan from_json(const nlohmann::json&);  // throws hw::Error
  bool operator==(const HeadPlan&) const = default;
};

// Column layout of one layer's fused QKV activations [N, qkv_width] and of the attention
// output [N, out_width], derived from the layer plan. Only what some head reads is present:
// Q blocks for query heads that read Q/K, K blocks for KV heads some query head of the group
// reads Q/K from, V blocks for KV heads some non-pruned query head of the group reads, and
// output blocks for non-pruned query heads. Blocks are head_dim wide, in head order, and the
// QKV sections are ordered Q | K | V as in GPT-2's c_attn.
struct LayerLayout {
  int n_head = 0, n_kv_head = 0, head_dim = 0;
  std::vector<int> q_slot;  // per query head, -1 if absent
  std::vector<int> k_slot;  // per KV head, -1 if absent
  std::vector<int> v_slot;  // per KV head, -1 if absent
  std::vector<int> o_slot;  // per query head, -1 if pruned
  int n_q = 0, n_k = 0, n_v = 0, n_o = 0;

  static LayerLayout build(const LayerPlan& plan, int n_head, int n_kv_head, int head_dim);
  int kv_head_of(int h) const { return h / (n_head / n_kv_head); }
  int64_t qkv_width() const { return int64_t(n_q + n_k + n_v) * head_dim; }
  int64_t out_width() const { return int64_t(n_o) * head_dim; }
  int64_t q_col(int h) const { return int64_t(q_slot[h]) * head_dim; }
  int64_t k_col(int g) const { return int64_t(n_q + k_slot[g]) * head_dim; }
  int64_t v_col(int g) const { return int64_t(n_q + n_k + v_slot[g]) * head_dim; }
  int64_t out_col(int h) const { return int64_t(o_slot[h]) * head_dim; }
};

}  // namespace hw::attn

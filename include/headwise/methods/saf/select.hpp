#pragma once
// SAF head selection over all layers (paper §3.1, Appendix A.2; methods.md). Candidates are
// ranked globally; each candidate's compact fit decides pass/skip through the KL gate, and the
// next candidate is taken until the quota is full or candidates run out (the shortfall is
// reported, never hidden).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/attention/head_plan.hpp"

namespace hw::saf {

enum class Selector { Variance, KL, Random, GateTaylor };
Selector parse_selector(const std::string& name);  // "variance", "kl", "random", "gate_taylor"
std::string selector_name(Selector s);

using ScoreGrid = std::vector<std::vector<double>>;  // [layer][head]

// Called once per candidate the selection tries; returns that head's compact-fit mean row KL.
// The head passes iff the KL is finite and <= max_kl. An empty gate means no KL gate.
using FitGate = std::function<double(int layer, int head)>;

inline constexpr double kDefaultMaxKl = 0.2;

struct HeadRecord {
  int layer = 0, head = 0;
  std::map<std::string, double> scores;  // by name; the caller may add more before to_json
  bool selected = false;
  bool tried = false;    // the gate was called for this head
  bool skipped = false;  // tried and failed the KL gate
  double fit_kl = 0.0;   // meaningful iff tried
};

struct Selection {
  Selector selector = Selector::Variance;
  std::string score_name;  // the scores key that ranked the heads
  int n_layer = 0, n_head = 0;
  double ratio = 0.0;
  int requested = 0;
  bool gated = false;
  double max_kl = kDefaultMaxKl;
  std::vector<std::pair<int, int>> heads;  // (layer, head) accepted, in acceptance order
  std::vector<HeadRecord> records;          // one per head, flat index layer * n_head + head

  int shortfall() const { return requested - int(heads.size()); }
  std::vector<int> per_layer_counts() const;
  HeadRecord& record(int layer, int head) { return records[size_t(layer * n_head + head)]; }
  const HeadRecord& record(int layer, int head) const {
    return records[size_t(layer * n_head + head)];
  }
  // For intervention.json: selector, ratio, requested, shortfall, max_kl (null if ungated),
  // per_layer_counts, selected [[l, h], ...] and heads [{layer, head, scores, selected,
  // fit_kl (null if not tried), skipped}].
  nlohmann::json to_json() const;
};

// k = round(ratio * L * H), halves to even (as Python's round in the official code).
int quota(double ratio, int n_layer, int n_head);

// The heads a selection may take, for SAF on a model another method (or an earlier SAF) has
// already changed: only eligible heads are tried (flat index l * H + h; empty = every head),
// and `requested` heads are wanted (< 0: quota(ratio, L, H)). Ineligible heads keep their
// records (scores included) but are never selected.
struct Candidates {
  std::vector<char> eligible;
  int requested = -1;
  bool allows(int flat) const { return eligible.empty() || eligible[size_t(flat)] != 0; }
};
// `ratio_of` = "all": round(ratio * L * H) heads; "remaining": round(ratio * eligible heads).
Candidates softmax_candidates(const attn::HeadPlan& plan, double ratio, const std::string& ratio_of);

// Variance or KL selection: ascending score, ties by flat index l * H + h, KL-gated.
Selection select_by_score(Selector selector, const ScoreGrid& scores, double ratio,
                          const FitGate& gate, double max_kl = kDefaultMaxKl, const Candidates& cand = {});

// Random control: per-layer counts equal to the accepted heads per layer of a variance
// selection; within each layer (in layer order) heads are visited in a random order drawn
// from Rng(seed) (Fisher-Yates), and a KL failure backfills from the same layer.
Selection select_random(const Selection& variance_selection, uint64_t seed, const FitGate& gate,
                        double max_kl = kDefaultMaxKl, const Candidates& cand = {});

// Gate-Taylor pruning: raw[l][h] = mean over calibration sequences of |d loss_seq / d gate|
// (finite, >= 0); each layer's row is L2-normalised (a zero row stays zero), then the k
// lowest normalised scores over all layers are pruned (ties by flat index). No KL gate.
Selection select_gate_taylor(const ScoreGrid& raw_scores, double ratio, const Candidates& cand = {});
// raw[l][h] = mean_s |signed[s][l][h]| from per-sequence signed gate derivatives.
ScoreGrid gate_taylor_raw_scores(const std::vector<ScoreGrid>& signed_per_sequence);

// Sets the selected heads of `plan` to `kind` (Static for SAF, Pruned for pruning controls).
void mark_in_plan(attn::HeadPlan& plan, const Selection& selection, attn::HeadKind kind);

}  // namespace hw::saf

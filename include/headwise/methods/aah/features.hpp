#pragma once
// AAH's per-head features (docs/methods/aah.md): [mean|q|, std q, mean|k|, std k,
// mean|v|, std v, entropy / log T, head-output norm, last-key weight] of every layer's heads,
// from head_forward_stats over the training forwards a planner observes (summed over the
// update's micro-steps and averaged), folded into an EMA once per control update:
// ema = beta ema + (1 - beta) x (the first fold takes x itself).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/methods/aah/grouping.hpp"
#include "headwise/model/attention_observer.hpp"

namespace hw {
namespace dist {
class Comm;
}

namespace aah {

// Doubles as text, bit for bit (16 hex digits each), for planner state.
std::string doubles_to_hex(const std::vector<double>& x);
std::vector<double> doubles_from_hex(const std::string& s);

class FeatureTracker {
 public:
  FeatureTracker(int n_layer, int n_head);
  // Adds one forward of layer v.layer (entropy and last-key weight on every row_stride-th row).
  void observe(const AttentionView& v, int64_t row_stride);
  bool pending() const;
  // Sums the pending observations over ranks and folds their mean into the EMA.
  void fold(dist::Comm& comm, double beta);
  bool has_features() const { return have_; }
  // The EMA features of layer l's heads (zeros before the first fold).
  std::vector<Vec> layer(int l) const;

  nlohmann::json state() const;
  void restore(const nlohmann::json& s);

 private:
  int L_, H_;
  std::vector<double> sum_, count_, ema_;
  bool have_ = false;
};

}  // namespace aah
}  // namespace hw

#pragma once
// Per-head statistics of one layer's attention in an ordinary forward, from what an
// AttentionObserver sees: the features AAH's controller reads (docs/methods/aah.md:
// [mean|q|, std q, mean|k|, std k, mean|v|, std v, e, n, r]), for any planner that scores heads
// from training. Means and standard deviations run over batch, time and head dimension.
#include <array>
#include <vector>

#include "headwise/model/attention_observer.hpp"

namespace hw {

struct HeadForwardStats {
  double mean_abs_q = 0, std_q = 0;  // the query head's Q block (0 when the head reads no Q)
  double mean_abs_k = 0, std_k = 0;  // its KV head's K block (0 when absent)
  double mean_abs_v = 0, std_v = 0;  // its KV head's V block (0 when absent)
  // Softmax-family heads (softmax, window, sink_window), 0 for the others: the mean over rows of
  // the attention entropy over the row's visible keys divided by log T (0 when T = 1), and the
  // mean weight on the row's last key (j = i).
  double entropy = 0, last_key_weight = 0;
  double output_norm = 0;  // mean over rows of the head output's L2 norm (0 for a pruned head)

  // In the order of AAH's feature vector.
  std::array<double, 9> features() const {
    return {mean_abs_q, std_q, mean_abs_k, std_k, mean_abs_v, std_v, entropy, output_norm, last_key_weight};
  }
};

// One entry per query head of the layer. The entropy and last-key weight recompute the
// probabilities from q and k in double: O(B T^2 head_dim) per head, paid only on the updates a
// planner observes; row_stride > 1 takes every row_stride-th query row for those two.
std::vector<HeadForwardStats> head_forward_stats(const AttentionView& v, int64_t row_stride = 1);

}  // namespace hw

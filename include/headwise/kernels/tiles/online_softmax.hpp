#pragma once
// Online softmax over key tiles (FlashAttention-2): each row keeps its running max m and sum
// l; a new tile raises the max, rescales what was accumulated by exp(m_old - m_new) and adds
// its own probabilities. The forward saves log-sum-exp = m + log(l) per row (what the CPU
// reference saves in row_stats), and the backward rebuilds P = exp(s - lse) from it.
// The scalar steps are shared by the kernels (which reduce the row max/sum across a warp) and
// by the CPU test, which chains them over tiles in the kernel's order.
#include <cmath>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// exp(x), but exactly zero where float would go subnormal (x < -87), as the CPU reference's
// exp_or_zero; maps a masked logit (-inf) to 0.
HW_HOST_DEVICE float exp_or_zero(float x) { return x < -87.0f ? 0.0f : expf(x); }

struct OnlineRow {
  float m = -INFINITY;  // running max of the visible logits seen so far
  float l = 0.0f;       // running sum of exp(logit - m)
};

HW_HOST_DEVICE float online_new_max(float m_old, float tile_max) { return m_old > tile_max ? m_old : tile_max; }

// Probability of logit s at the new running max (0 while the row has seen no visible key).
HW_HOST_DEVICE float online_prob(float s, float m_new) { return m_new == -INFINITY ? 0.0f : exp_or_zero(s - m_new); }

// Factor for what the row accumulated before this tile.
HW_HOST_DEVICE float online_correction(float m_old, float m_new) {
  return m_new == -INFINITY ? 1.0f : exp_or_zero(m_old - m_new);
}

HW_HOST_DEVICE void online_commit(OnlineRow& r, float m_new, float corr, float tile_sum) {
  r.l = r.l * corr + tile_sum;
  r.m = m_new;
}

// The row's log-sum-exp (row_stats of softmax-family heads); every row sees at least itself.
HW_HOST_DEVICE float online_lse(const OnlineRow& r) { return r.m + logf(r.l); }

// Backward: the probability rebuilt from the saved log-sum-exp.
HW_HOST_DEVICE float prob_from_lse(float s, float lse) { return exp_or_zero(s - lse); }

// Backward: dS = P (dP - delta) scale, delta = dO . O of the row.
HW_HOST_DEVICE float score_grad(float p, float dp, float delta, float scale) { return p * (dp - delta) * scale; }

// One row's step over one tile, sequentially: s[0, n) holds the tile's logits (masked ones
// -inf) and is replaced by the probabilities at the new max; returns the correction factor
// the row's output accumulator must be multiplied by before adding P V.
HW_HOST_DEVICE float online_row_step(OnlineRow& r, float* s, int n) {
  float mx = -INFINITY;
  for (int c = 0; c < n; ++c) mx = s[c] > mx ? s[c] : mx;
  const float m_new = online_new_max(r.m, mx);
  float sum = 0.0f;
  for (int c = 0; c < n; ++c) {
    s[c] = online_prob(s[c], m_new);
    sum += s[c];
  }
  const float corr = online_correction(r.m, m_new);
  online_commit(r, m_new, corr, sum);
  return corr;
}

}  // namespace hw::tiles

#pragma once
// AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False): decoupled weight decay
// p *= 1 - lr * wd applied to tensors of rank >= 2 only (as nanoGPT and llm.c do), bias-corrected
// moments, eps added to sqrt(v_hat). Moments live in two arenas whose tensors carry the
// parameters' names, so a head-plan change remaps them like the parameters themselves.
#include <cstdint>
#include <memory>
#include <utility>

#include "headwise/core/arena.hpp"

namespace hw {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(const AdamWConfig& cfg, const Arena& params);
  // One update with learning rate lr; `t` counts updates from 1 (bias correction).
  void step(Arena& params, const Arena& grads, double lr, int64_t t);
  // Same, restricted to floats [begin, end) of the parameter arena's block (ZeRO-1 shards use
  // ranges of the block, so shards line up with reduce-scatter over the gradient block).
  void step_range(Arena& params, const Arena& grads, double lr, int64_t t, int64_t begin, int64_t end);
  Arena& m() { return *m_; }
  Arena& v() { return *v_; }
  const AdamWConfig& config() const { return cfg_; }
  // Re-declare the moments for a new parameter layout (zeroed) and hand back the old arenas so
  // the caller can remap their values (remap_arena).
  std::pair<std::unique_ptr<Arena>, std::unique_ptr<Arena>> rebuild(const Arena& params);

 private:
  AdamWConfig cfg_;
  std::unique_ptr<Arena> m_, v_;
};

// Global L2 norm over every gradient tensor (double accumulation, fixed order).
double grad_global_norm(const Arena& grads);
// torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1.
// Returns the pre-clip norm. `norm` is passed in so data-parallel callers can use the global one.
void clip_grads(Arena& grads, double norm, double max_norm);

struct LrSchedule {
  double lr = 6e-4, min_lr = 6e-5;
  int64_t warmup_steps = 0, total_steps = 1;
  // lr * (step+1) / warmup while step < warmup; then cosine from lr to min_lr over the rest.
  double at(int64_t step) const;
};

}  // namespace hw

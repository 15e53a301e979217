#pragma once
// AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False): decoupled weight decay
// p *= 1 - lr * wd applied to tensors of rank >= 2 only (as nanoGPT and llm.c do), bias-corrected
// moments, eps added to sqrt(v_hat).
//
// Two modes. Full (the default): moments live in two arenas whose tensors carry the parameters'
// names, so a head-plan change remaps them like the parameters themselves. Sharded (ZeRO-1): the
// optimizer owns the moments only for the floats [begin, end) of the parameter arena's block
// (one tensor "shard" of end - begin floats per moment arena), so a rank holds 1/W of the state.
//
// Every update, norm and clip runs as backend ops (adamw_update, sum_squares, scale) on the
// memory of the backend's device; the moments live on the parameters' device.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"

namespace hw {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

// A half-open range of floats of a parameter arena's block (a ZeRO-1 shard).
struct BlockShard {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class AdamW {
 public:
  // Full mode: moments for every parameter tensor. `ops` runs the updates (its device holds
  // params, gradients and moments) and must outlive the optimizer.
  AdamW(const AdamWConfig& cfg, const Backend<float>& ops, const Arena& params);
  // Sharded mode: moments only for `shard` of params' block (must lie inside the block).
  AdamW(const AdamWConfig& cfg, const Backend<float>& ops, const Arena& params, BlockShard shard);
  // One update with learning rate lr; `t` counts updates from 1 (bias correction). Full mode only.
  void step(Arena& params, const Arena& grads, double lr, int64_t t);
  // Same, restricted to floats [begin, end) of the parameter arena's block (ZeRO-1 shards use
  // ranges of the block, so shards line up with reduce-scatter over the gradient block). In
  // sharded mode the range must lie inside the owned shard.
  void step_range(Arena& params, const Arena& grads, double lr, int64_t t, int64_t begin, int64_t end);
  // Full mode: tensors named like the parameters. Sharded mode: one tensor "shard" each, whose
  // float i is float shard().begin + i of the block.
  Arena& m() { return *m_; }
  Arena& v() { return *v_; }
  const Arena& m() const { return *m_; }
  const Arena& v() const { return *v_; }
  bool sharded() const { return sharded_; }
  BlockShard shard() const { return shard_; }  // the whole block in full mode
  size_t bytes() const { return m_->bytes() + v_->bytes(); }
  const AdamWConfig& config() const { return cfg_; }
  const Backend<float>& ops() const { return ops_; }
  // Full mode: re-declare the moments for a new parameter layout (zeroed) and hand back the old
  // arenas so the caller can remap their values (remap_arena).
  std::pair<std::unique_ptr<Arena>, std::unique_ptr<Arena>> rebuild(const Arena& params);
  // Sharded mode: zeroed moments for `shard` of a new parameter layout, for the caller to fill.
  void rebuild(const Arena& params, BlockShard shard);

 private:
  AdamWConfig cfg_;
  const Backend<float>& ops_;
  bool sharded_ = false;
  BlockShard shard_;
  std::unique_ptr<Arena> m_, v_;
};

// A zeroed arena on params' device declaring the same tensors as `params`, so its block has the
// same layout (same offsets, same padding): full moments to load into, gather into or remap through.
std::unique_ptr<Arena> arena_like(const Arena& params, const std::string& role);

// Global L2 norm over every gradient tensor: one ops.sum_squares over the whole block (its
// alignment padding is zero), double accumulation in the backend's fixed order.
double grad_global_norm(const Backend<float>& ops, const Arena& grads);
// The coefficient torch.nn.utils.clip_grad_norm_ multiplies by, max_norm / (norm + 1e-6), or 1
// when that is >= 1 or clipping is off (max_norm <= 0): nothing to do.
float clip_coefficient(double norm, double max_norm);
// Multiply the gradient block by clip_coefficient(norm, max_norm) (ops.scale). `norm` is passed
// in so data-parallel callers can use the global one.
void clip_grads(const Backend<float>& ops, Arena& grads, double norm, double max_norm);

struct LrSchedule {
  double lr = 6e-4, min_lr = 6e-5;
  int64_t warmup_steps = 0, total_steps = 1;
  // lr * (step+1) / warmup while step < warmup; then cosine from lr to min_lr over the rest.
  double at(int64_t step) const;
};

}  // namespace hw

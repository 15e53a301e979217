#pragma once
// The sum of one update's micro-step gradients, in a fixed pairwise tree.
//
// Why a tree and not the model's in-place accumulation: a GEMM that accumulates into its output
// (C += A B) adds C in an order its BLAS picks by CPU and shape (OpenBLAS folds C into each
// K-block on Haswell/Zen, once on SkylakeX), so "g0 then g1 on top" rounds differently from
// "g0 + g1". Here every micro-step's gradient is computed alone into zeroed gradients and the
// partial sums are added with elementwise adds only, in the order of a binary counter:
// micro-steps 0..A-1 of a rank sum as ((g0 + g1) + (g2 + g3)) + ... . Rank r of `world` trains on
// the update's micro-batches [r*A, (r+1)*A), and 2 ranks add their sums as s0 + s1, so 2 ranks
// with A micro-steps (A a power of two) give the same bits as 1 rank with 2A, whatever BLAS
// runs underneath. The error of the sum also grows with log2(A), not A.
//
// Cost: ceil(log2 A) extra gradient-sized buffers (none for A = 1) and a few elementwise passes
// per micro-step; nothing is allocated inside the step.
#include <cstdint>
#include <memory>
#include <vector>

#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"

namespace hw {

class MicroStepSum {
 public:
  // Partial-sum buffers laid out like `grads`, for updates of `micro_steps` micro-steps.
  MicroStepSum(const Backend<float>& ops, const Arena& grads, int64_t micro_steps);

  int64_t micro_steps() const { return micro_steps_; }
  // Number of partial-sum buffers held (ceil(log2 micro_steps)).
  int levels() const { return int(levels_.size()); }

  // After micro-step m < micro_steps-1 of an update, whose gradient alone is in `grads`: fold it
  // into the partial sums and zero `grads` for the next micro-step.
  void park(Arena& grads, int64_t m);
  // After (or, range by range, during) the last micro-step's backward: add the parked partial
  // sums to floats [begin, end) of `grads`. Call it once for every part of the block, or once
  // with the whole block.
  void finish(float* grads, int64_t begin, int64_t end) const;

 private:
  const Backend<float>& ops_;
  int64_t micro_steps_ = 1;
  int64_t floats_ = 0;
  std::vector<std::unique_ptr<Arena>> levels_;  // levels_[k] holds a sum of 2^k micro-steps
};

}  // namespace hw

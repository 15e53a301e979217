// Softmax cross-entropy fused with its gradient, so the [N,V] logits are read once for the
// statistics and once for the gradient, and exp runs once per logit.
#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vec_math.hpp"

namespace hw::cpu {

namespace {

// One row; returns its loss in double. drow may alias row: every element of row that is
// needed later (the max, the target logit) is read before drow is written, and each later
// write only replaces the element the same iteration just read.
//
// The exponentials are written out first and summed in a separate loop: g++ vectorizes each
// loop alone, but not a loop that both calls vexp and accumulates in double.
template <class F>
double ce_row(F* drow, const F* row, int32_t target, int64_t V, double dloss) {
  F mx = row[0];
  // A plain comparison, not std::max: g++ vectorizes only this form of the max reduction.
#pragma omp simd reduction(max : mx)
  for (int64_t v = 0; v < V; v++) mx = mx > row[v] ? mx : row[v];
  const double target_logit = static_cast<double>(row[target]);
  double sum = 0.0;
  if (drow) {
    // The shifted exponentials become the gradient after one scaling.
#pragma omp simd
    for (int64_t v = 0; v < V; v++) drow[v] = detail::vexp(row[v] - mx);
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; v++) sum += static_cast<double>(drow[v]);
  } else {
    constexpr int64_t kChunk = 1024;  // a stack buffer in L1
    F e[kChunk];
    for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
      const int64_t w = std::min(kChunk, V - v0);
#pragma omp simd
      for (int64_t j = 0; j < w; j++) e[j] = detail::vexp(row[v0 + j] - mx);
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < w; j++) sum += static_cast<double>(e[j]);
    }
  }
  const double loss = static_cast<double>(mx) + std::log(sum) - target_logit;
  if (drow) {
    const F s = static_cast<F>(dloss / sum);
#pragma omp simd
    for (int64_t v = 0; v < V; v++) drow[v] *= s;
    drow[target] -= static_cast<F>(dloss);
  }
  return loss;
}

}  // namespace

template <class F>
double crossentropy_forward_backward(F* losses, F* dlogits, const F* logits, const int32_t* targets, int64_t N,
                                     int64_t V, double dloss) {
  // Validate before the parallel region: an exception must not escape an OpenMP loop.
  for (int64_t n = 0; n < N; n++) {
    if ((targets[n] < 0 && targets[n] != kIgnoreTarget) || targets[n] >= V)
      hw::fail("crossentropy: target token " + std::to_string(targets[n]) + " at position " + std::to_string(n) +
               " is outside the vocabulary [0, " + std::to_string(V) + ")");
  }
  // Rows are processed in groups whose losses land in a stack buffer and are summed in row
  // order: a deterministic total without heap scratch, whether or not `losses` is given.
  constexpr int64_t kGroup = 256;
  double part[kGroup];
  double total = 0.0;
  for (int64_t n0 = 0; n0 < N; n0 += kGroup) {
    const int64_t ng = std::min(kGroup, N - n0);
    detail::parallel_for(ng, detail::worth_parallel(ng * V), [&](int64_t r) {
      const int64_t n = n0 + r;
      if (targets[n] == kIgnoreTarget) {  // no loss, no gradient
        part[r] = 0.0;
        if (dlogits)
          for (int64_t v = 0; v < V; ++v) dlogits[n * V + v] = F(0);
      } else {
        part[r] = ce_row(dlogits ? dlogits + n * V : nullptr, logits + n * V, targets[n], V, dloss);
      }
      if (losses) losses[n] = static_cast<F>(part[r]);
    });
    for (int64_t r = 0; r < ng; r++) total += part[r];
  }
  return total;
}

template double crossentropy_forward_backward<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t,
                                                     double);
template double crossentropy_forward_backward<double>(double*, double*, const double*, const int32_t*, int64_t,
                                                      int64_t, double);

}  // namespace hw::cpu

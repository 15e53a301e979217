#pragma once
// The frozen-attention error metrics of the OAL paper (App. C, Eq. (21)-(22)). For held-out
// sequence b the tested layers and heads are pooled first:
//   MSE = 1/B sum_b ||Yhat_b - Y_b||_F^2 / n_b,     RelMSE = 1/B sum_b ||Yhat_b - Y_b||_F^2 / ||Y_b||_F^2,
// n_b = the number of scalars of sequence b's outputs. RelMSE normalises each sequence by its own
// energy before the mean (not total error over total energy). "Pre" compares the heads' outputs
// before W_O; "post" concatenates a layer's heads in order and multiplies by the frozen output
// projection W_O (without its bias, which cancels in the error), both for the approximation and
// for the target, whose projected energy is the denominator.
#include <cstdint>
#include <vector>

namespace hw::oal {

// One held-out sequence's pooled error.
struct SequenceError {
  double err = 0.0, energy = 0.0;
  int64_t n = 0;
  void add(const double* approx, const double* exact, int64_t count);
};

struct FrozenMetrics {
  double mse = 0.0, rel_mse = 0.0;
  int64_t sequences = 0;
};
FrozenMetrics aggregate(const std::vector<SequenceError>& per_sequence);

// out[T, C] = heads[T, width] W[width, C] (W row-major: the layer's c_proj weight, Conv1D in x out).
void project(const double* heads, int64_t T, int64_t width, const double* W, int64_t C, double* out);

}  // namespace hw::oal

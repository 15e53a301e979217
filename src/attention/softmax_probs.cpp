// Dense causal softmax probabilities of one head from the forward's tiles (see softmax_probs.hpp).
// The GEMM blocks are the forward's (kTile query rows x kTile keys, key tiles up to the
// diagonal); they are written straight into the dense output rows instead of a tile scratch,
// since here the probabilities are the product.
#include "headwise/attention/softmax_probs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention/tile_ops.hpp"
#include "headwise/core/error.hpp"

namespace hw::attn {

template <class F>
void softmax_probabilities(const F* q, const F* k, int64_t ldx, int64_t T, int D, F* logits, F* probs) {
  using detail::kTile;
  check(T >= 1 && D >= 1, "attention: softmax_probabilities needs T (" + std::to_string(T) + ") and D (" +
                              std::to_string(D) + ") positive");
  check(q != nullptr && k != nullptr && probs != nullptr, "attention: softmax_probabilities: null q, k or probs");
  check(ldx >= D, "attention: softmax_probabilities: row stride smaller than D");
  const F scale = F(1) / std::sqrt(F(D));
  const int64_t n_tiles = (T + kTile - 1) / kTile;
  const detail::BlasSingleThreaded blas_on_calling_thread;  // query tiles are the parallel dimension
#pragma omp parallel for schedule(dynamic, 1) if (n_tiles > 1)
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t i0 = t * kTile;
    const int m = static_cast<int>(std::min<int64_t>(kTile, T - i0));
    F* band = probs + i0 * T;  // rows [i0, i0 + m)
    for (int64_t j0 = 0; j0 < i0 + m; j0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, i0 + m - j0));
      detail::gemm_rm(false, true, m, n, D, scale, q + i0 * ldx, ldx, k + j0 * ldx, ldx, F(0), band + j0, T);
    }
    for (int r = 0; r < m; ++r) {
      const int64_t i = i0 + r;
      F* row = band + int64_t(r) * T;
      if (logits) {
        std::copy(row, row + i + 1, logits + i * T);
        std::fill(logits + i * T + i + 1, logits + (i + 1) * T, F(0));
      }
      F mx = -std::numeric_limits<F>::infinity();
      for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
      F sum = F(0);
      for (int64_t j = 0; j <= i; ++j) sum += row[j] = detail::exp_or_zero(row[j] - mx);
      const F inv = F(1) / sum;  // sum >= 1: the maximum's own term is exp(0)
      for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
      std::fill(row + i + 1, row + T, F(0));
    }
  }
}

template void softmax_probabilities<float>(const float*, const float*, int64_t, int64_t, int, float*, float*);
template void softmax_probabilities<double>(const double*, const double*, int64_t, int64_t, int, double*, double*);

}  // namespace hw::attn

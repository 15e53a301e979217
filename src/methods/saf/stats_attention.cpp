// HeadStatsAccumulator::add_attention: a head's attention sample computed band by band and folded
// into the moments while the band is in cache (stats.hpp). The calibration of a 0.5B model at
// T 4096 wrote and re-read a 64 MB probability matrix per head and window (1,344 of them) and
// took a log per cell for the KL score; here a band is 64 rows x T floats per thread.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/tile_ops.hpp"
#include "headwise/core/error.hpp"
#include "headwise/methods/saf/stats.hpp"

namespace hw::saf {

void HeadStatsAccumulator::add_attention(const float* q, const float* k, int64_t ldx, int D) {
  using attn::detail::kTile;
  check(q != nullptr && k != nullptr && D >= 1 && ldx >= D, "saf::HeadStatsAccumulator::add_attention: bad q, k or D");
  const int T = T_;
  const int64_t n = count_ + 1;
  const double inv_n = 1.0 / double(n);
  const float scale = 1.0f / std::sqrt(float(D));
  const int bands = (T + kTile - 1) / kTile;
  std::vector<double> row_negent(static_cast<size_t>(T));
  const attn::detail::BlasSingleThreaded blas_on_calling_thread;  // bands are the parallel dimension
#pragma omp parallel
  {
    std::vector<float> band(size_t(kTile) * size_t(T));  // rows [i0, i0 + m) x keys [0, i0 + m)
#pragma omp for schedule(dynamic, 1)
    for (int t = 0; t < bands; ++t) {
      const int i0 = t * kTile, m = std::min(kTile, T - i0);
      // The tile products of softmax_probabilities, into the band's rows.
      for (int j0 = 0; j0 < i0 + m; j0 += kTile) {
        const int nk = std::min(kTile, i0 + m - j0);
        attn::detail::gemm_rm(false, true, m, nk, D, scale, q + int64_t(i0) * ldx, ldx, k + int64_t(j0) * ldx, ldx,
                              0.f, band.data() + j0, T);
      }
      for (int r = 0; r < m; ++r) {
        const int i = i0 + r;
        float* row = band.data() + size_t(r) * size_t(T);
        const int64_t base = int64_t(i) * (i + 1) / 2;
        if (needs_.logit_mean) {  // the raw logits (add_sample's logits argument)
          for (int j = 0; j <= i; ++j) {
            const double x = double(row[j]);
            double& lm = logit_mean_[size_t(base + j)];
            const double delta = x - lm;
            lm += delta * inv_n;
            if (needs_.logit_variance) logit_m2_[size_t(base + j)] += delta * (x - lm);
          }
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
        // e_j = exp(s_j - mx) summed as softmax_probabilities sums it; sum_j e_j (s_j - mx) on
        // the side for the KL term.
        float sum = 0.f;
        double ex = 0.0;
        for (int j = 0; j <= i; ++j) {
          const float x = row[j] - mx;
          const float e = attn::detail::exp_or_zero(x);
          row[j] = e;
          sum += e;
          ex += double(e) * double(x);
        }
        const float inv = 1.0f / sum;  // sum >= 1: the maximum's own term is exp(0)
        double dm2 = 0.0, psum = 0.0;
        for (int j = 0; j <= i; ++j) {
          const float p = row[j] * inv;
          const double x = double(p);
          double& mean = mean_[size_t(base + j)];
          const double delta = x - mean;
          mean += delta * inv_n;
          const double inc = delta * (x - mean);
          dm2 += inc;
          if (needs_.cell_variance) cell_m2_[size_t(base + j)] += inc;
          psum += x;
        }
        row_partial_[size_t(i)] = dm2;
        // sum_j q_j log q_j of the row renormalised (q = p / psum), log p_j = x_j - log(sum).
        const double S = std::max(psum, 1e-12);
        row_negent[size_t(i)] = double(inv) * ex / S - std::log(double(sum)) - std::log(S);
      }
    }
  }
  for (int i = 0; i < T; ++i) m2_total_ += row_partial_[size_t(i)];
  if (needs_.kl)
    for (int i = 0; i < T; ++i) neg_entropy_sum_ += row_negent[size_t(i)];
  count_ = n;
}

}  // namespace hw::saf

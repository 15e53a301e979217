#pragma once
// SAF calibration statistics of one head: float64 moments of its attention matrices A_n over
// the calibration sequences, merged with Chan's parallel formula (as the official code does),
// plus whatever the chosen score and target pattern need. Only the causal lower triangle is
// stored (packed row by row: row i starts at i(i+1)/2); the upper triangle is 0 in every
// sample, so its mean and M2 are exactly 0 and never stored.
#include <cstdint>
#include <vector>

namespace hw::saf {

// What to accumulate besides count, mean of A and the head's total M2 (always kept).
struct StatsNeeds {
  bool cell_variance = false;   // per-cell M2 of A (Dirichlet pattern)
  bool logit_mean = false;      // per-cell mean of the raw logits (sharp_mean, gaussian)
  bool logit_variance = false;  // per-cell M2 of the raw logits (gaussian; implies logit_mean)
  bool kl = false;              // sum over samples of sum A log A (forward-KL score)
};

class HeadStatsAccumulator {
 public:
  HeadStatsAccumulator(int T, StatsNeeds needs);

  int T() const { return T_; }
  const StatsNeeds& needs() const { return needs_; }
  int64_t count() const { return count_; }
  int64_t cells() const { return int64_t(T_) * (T_ + 1) / 2; }  // packed lower triangle

  // One calibration sample: probs (and logits, required iff needs().logit_mean) are dense
  // T x T row-major as capture.hpp writes them; only cells j <= i are read. Welford's update,
  // which is Chan's merge with a batch of one.
  void add_sample(const double* probs, const double* logits = nullptr);
  void add_sample(const float* probs, const float* logits = nullptr);
  // One sample computed here from a head's queries and keys (T rows each, row stride ldx,
  // head_dim D): its causal softmax attention in fp32, as attn::softmax_probabilities computes
  // it (the same tile products, exponentials and sums), folded into the moments one band of 64
  // rows at a time while the band is in cache, so no T x T matrix is ever written. Means, M2 and
  // logit moments are add_sample's on those probabilities, bit for bit; the KL term takes each
  // row's log p from its logits (log p_j = s_j - max - log z, no log per cell), which agrees
  // with add_sample's to about 1e-7 per row.
  void add_attention(const float* q, const float* k, int64_t ldx, int D);
  // n samples stacked [n][T][T]: two-pass batch mean and M2, then one Chan merge.
  void add_batch(const double* probs, const double* logits, int n);
  // Chan's parallel merge of another accumulator of the same T and needs (e.g. another
  // rank's, after unpack). Merging in a fixed order keeps the result deterministic.
  void merge(const HeadStatsAccumulator& other);

  // All state as one flat float64 vector, for moving between MPI ranks: gather every rank's
  // packed buffer, unpack each into an accumulator, merge them in rank order. Layout:
  // [count, T, needs bits, m2_total, neg_entropy_sum, mean, cell_m2?, logit_mean?, logit_m2?]
  // (each optional block is cells() long and present iff its need is set).
  int64_t packed_size() const;
  void pack(double* out) const;
  void unpack(const double* in, int64_t size);  // throws hw::Error on a T/needs/size mismatch

  // Raw buffers (packed lower triangle; empty when not needed).
  const std::vector<double>& mean_packed() const { return mean_; }
  const std::vector<double>& cell_m2_packed() const { return cell_m2_; }
  const std::vector<double>& logit_mean_packed() const { return logit_mean_; }
  const std::vector<double>& logit_m2_packed() const { return logit_m2_; }
  double m2_total() const { return m2_total_; }
  double neg_entropy_sum() const { return neg_entropy_sum_; }

  // Dense T x T views (zeros above the diagonal). Each throws if its need was not set, and
  // the variance/std ones need count() >= 2 (unbiased, divisor n - 1).
  void mean_matrix(double* out) const;
  void cell_variance_matrix(double* out) const;
  void logit_mean_matrix(double* out) const;
  void logit_std_matrix(double* out) const;

  // Variance score as methods.md: M2_total / ((n - 1) T^2), T^2 counting the masked upper
  // triangle. Equals Eq. (1) of the paper (see variance_score_eq1). Needs count() >= 2.
  double variance_score() const;
  // The same number as the mean over all T^2 cells of the per-cell unbiased variance
  // (needs cell_variance); kept to check the identity.
  double variance_score_from_cells() const;
  // Forward-KL score: mean over samples and rows of KL(A_n row || mean row), clamped at 0.
  // Single pass, as the official code: sum_n KL(A_n || M) = sum_n sum A_n log A_n
  // - n sum M log M (the cross term sum_n A_n log M equals n M log M because M is the mean),
  // so only the scalar sum of A log A is accumulated. Rows are renormalised (sum clamped at
  // 1e-12) and 0 log 0 = 0. Needs needs().kl and count() >= 1.
  double kl_score() const;

 private:
  template <typename In>
  void add_sample_impl(const In* probs, const In* logits);
  void require_count(int64_t n, const char* what) const;

  int T_;
  StatsNeeds needs_;
  int64_t count_ = 0;
  double m2_total_ = 0.0;
  double neg_entropy_sum_ = 0.0;
  std::vector<double> mean_, cell_m2_, logit_mean_, logit_m2_;
  std::vector<double> row_partial_;  // per-row partial sums, combined in row order
};

// Eq. (1) of the paper straight from stored samples (each dense T x T):
// 1 / ((N - 1) T^2) sum_n ||A_n - mean||_F^2, computed in two passes. For small N only.
double variance_score_eq1(const std::vector<const double*>& samples, int T);

// sum_ij A_ij log A_ij over the causal cells of a dense T x T matrix after renormalising each
// row (sum clamped at 1e-12), 0 log 0 = 0: the per-sample term of the KL score.
double row_normalised_neg_entropy(const double* A, int T);

}  // namespace hw::saf

#include "headwise/methods/saf/stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::saf {

namespace {

constexpr double kRowSumFloor = 1e-12;  // as the official score: rows renormalised, sum >= 1e-12

int64_t row_start(int i) { return int64_t(i) * (i + 1) / 2; }

// sum_j p log p over one causal row of length n after renormalising it.
template <typename In>
double row_neg_entropy(const In* row, int n) {
  double sum = 0.0;
  for (int j = 0; j < n; ++j) sum += double(row[j]);
  const double inv = 1.0 / std::max(sum, kRowSumFloor);
  double acc = 0.0;
  for (int j = 0; j < n; ++j) {
    const double p = double(row[j]) * inv;
    if (p > 0.0) acc += p * std::log(p);
  }
  return acc;
}

unsigned needs_bits(const StatsNeeds& n) {
  return (n.cell_variance ? 1u : 0u) | (n.logit_mean ? 2u : 0u) | (n.logit_variance ? 4u : 0u) |
         (n.kl ? 8u : 0u);
}

}  // namespace

HeadStatsAccumulator::HeadStatsAccumulator(int T, StatsNeeds needs) : T_(T), needs_(needs) {
  check(T >= 1, "saf::HeadStatsAccumulator: T must be >= 1 (got " + std::to_string(T) + ")");
  if (needs_.logit_variance) needs_.logit_mean = true;  // the variance is centred on the mean
  const auto n = static_cast<size_t>(cells());
  mean_.assign(n, 0.0);
  if (needs_.cell_variance) cell_m2_.assign(n, 0.0);
  if (needs_.logit_mean) logit_mean_.assign(n, 0.0);
  if (needs_.logit_variance) logit_m2_.assign(n, 0.0);
  row_partial_.assign(static_cast<size_t>(T), 0.0);
}

void HeadStatsAccumulator::require_count(int64_t n, const char* what) const {
  check(count_ >= n, std::string("saf::HeadStatsAccumulator: ") + what + " needs at least " +
                         std::to_string(n) + " calibration sample(s), have " +
                         std::to_string(count_));
}

template <typename In>
void HeadStatsAccumulator::add_sample_impl(const In* probs, const In* logits) {
  check(probs != nullptr, "saf::HeadStatsAccumulator::add_sample: null probs");
  check(!needs_.logit_mean || logits != nullptr,
        "saf::HeadStatsAccumulator::add_sample: logits required (sharp_mean/gaussian pattern)");
  const int64_t n = count_ + 1;
  const double inv_n = 1.0 / double(n);
  const int T = T_;
  // Per-row partials (M2 increment in row_partial_, A log A in a second pass) are combined in
  // row order below, so the result does not depend on the thread count.
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const In* a = probs + int64_t(i) * T;
    const int64_t base = row_start(i);
    double dm2 = 0.0;
    for (int j = 0; j <= i; ++j) {
      const double x = double(a[j]);
      double& m = mean_[base + j];
      const double delta = x - m;
      m += delta * inv_n;
      const double inc = delta * (x - m);
      dm2 += inc;
      if (needs_.cell_variance) cell_m2_[base + j] += inc;
    }
    row_partial_[i] = dm2;
    if (needs_.logit_mean) {
      const In* s = logits + int64_t(i) * T;
      for (int j = 0; j <= i; ++j) {
        const double x = double(s[j]);
        double& m = logit_mean_[base + j];
        const double delta = x - m;
        m += delta * inv_n;
        if (needs_.logit_variance) logit_m2_[base + j] += delta * (x - m);
      }
    }
  }
  for (int i = 0; i < T; ++i) m2_total_ += row_partial_[i];
  if (needs_.kl) {
#pragma omp parallel for schedule(static, 16)
    for (int i = 0; i < T; ++i) row_partial_[i] = row_neg_entropy(probs + int64_t(i) * T, i + 1);
    for (int i = 0; i < T; ++i) neg_entropy_sum_ += row_partial_[i];
  }
  count_ = n;
}

void HeadStatsAccumulator::add_sample(const double* probs, const double* logits) {
  add_sample_impl(probs, logits);
}
void HeadStatsAccumulator::add_sample(const float* probs, const float* logits) {
  add_sample_impl(probs, logits);
}

void HeadStatsAccumulator::add_batch(const double* probs, const double* logits, int n) {
  check(n >= 1, "saf::HeadStatsAccumulator::add_batch: empty batch");
  check(probs != nullptr, "saf::HeadStatsAccumulator::add_batch: null probs");
  check(!needs_.logit_mean || logits != nullptr,
        "saf::HeadStatsAccumulator::add_batch: logits required (sharp_mean/gaussian pattern)");
  HeadStatsAccumulator b(T_, needs_);
  const int T = T_;
  const int64_t TT = int64_t(T) * T;
  // Two-pass moments of the batch, per cell; each row independent.
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const int64_t base = row_start(i);
    double dm2 = 0.0, negent = 0.0;
    for (int j = 0; j <= i; ++j) {
      const int64_t cell = int64_t(i) * T + j;
      double s = 0.0;
      for (int r = 0; r < n; ++r) s += probs[r * TT + cell];
      const double m = s / n;
      double m2 = 0.0;
      for (int r = 0; r < n; ++r) {
        const double d = probs[r * TT + cell] - m;
        m2 += d * d;
      }
      b.mean_[base + j] = m;
      dm2 += m2;
      if (needs_.cell_variance) b.cell_m2_[base + j] = m2;
      if (needs_.logit_mean) {
        double ls = 0.0;
        for (int r = 0; r < n; ++r) ls += logits[r * TT + cell];
        const double lm = ls / n;
        b.logit_mean_[base + j] = lm;
        if (needs_.logit_variance) {
          double lm2 = 0.0;
          for (int r = 0; r < n; ++r) {
            const double d = logits[r * TT + cell] - lm;
            lm2 += d * d;
          }
          b.logit_m2_[base + j] = lm2;
        }
      }
    }
    if (needs_.kl)
      for (int r = 0; r < n; ++r) negent += row_neg_entropy(probs + r * TT + int64_t(i) * T, i + 1);
    b.row_partial_[i] = dm2;
    row_partial_[i] = negent;
  }
  for (int i = 0; i < T; ++i) {
    b.m2_total_ += b.row_partial_[i];
    b.neg_entropy_sum_ += row_partial_[i];
  }
  b.count_ = n;
  merge(b);
}

void HeadStatsAccumulator::merge(const HeadStatsAccumulator& o) {
  check(o.T_ == T_ && needs_bits(o.needs_) == needs_bits(needs_),
        "saf::HeadStatsAccumulator::merge: T or needs differ (T " + std::to_string(T_) + " vs " +
            std::to_string(o.T_) + ")");
  if (o.count_ == 0) return;
  if (count_ == 0) {
    *this = o;
    return;
  }
  const double na = double(count_), nb = double(o.count_), n = na + nb;
  const double wb = nb / n, wab = na * nb / n;
  const int T = T_;
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const int64_t base = row_start(i);
    double corr = 0.0;
    for (int64_t c = base; c <= base + i; ++c) {
      const double delta = o.mean_[c] - mean_[c];
      mean_[c] += delta * wb;
      corr += delta * delta;
      if (needs_.cell_variance) cell_m2_[c] += o.cell_m2_[c] + delta * delta * wab;
      if (needs_.logit_mean) {
        const double ld = o.logit_mean_[c] - logit_mean_[c];
        logit_mean_[c] += ld * wb;
        if (needs_.logit_variance) logit_m2_[c] += o.logit_m2_[c] + ld * ld * wab;
      }
    }
    row_partial_[i] = corr;
  }
  double corr_total = 0.0;
  for (int i = 0; i < T; ++i) corr_total += row_partial_[i];
  m2_total_ += o.m2_total_ + corr_total * wab;
  neg_entropy_sum_ += o.neg_entropy_sum_;
  count_ += o.count_;
}

int64_t HeadStatsAccumulator::packed_size() const {
  int64_t blocks = 1 + (needs_.cell_variance ? 1 : 0) + (needs_.logit_mean ? 1 : 0) +
                   (needs_.logit_variance ? 1 : 0);
  return 5 + blocks * cells();
}

void HeadStatsAccumulator::pack(double* out) const {
  out[0] = double(count_);
  out[1] = double(T_);
  out[2] = double(needs_bits(needs_));
  out[3] = m2_total_;
  out[4] = neg_entropy_sum_;
  double* p = out + 5;
  for (const auto* v : {&mean_, &cell_m2_, &logit_mean_, &logit_m2_}) {
    std::copy(v->begin(), v->end(), p);
    p += v->size();
  }
}

void HeadStatsAccumulator::unpack(const double* in, int64_t size) {
  check(size == packed_size() && in[1] == double(T_) && in[2] == double(needs_bits(needs_)),
        "saf::HeadStatsAccumulator::unpack: buffer of " + std::to_string(size) +
            " doubles does not match T=" + std::to_string(T_) + " and these needs");
  check(in[0] >= 0 && in[0] == std::floor(in[0]),
        "saf::HeadStatsAccumulator::unpack: bad sample count");
  count_ = int64_t(in[0]);
  m2_total_ = in[3];
  neg_entropy_sum_ = in[4];
  const double* p = in + 5;
  for (auto* v : {&mean_, &cell_m2_, &logit_mean_, &logit_m2_}) {
    std::copy(p, p + v->size(), v->begin());
    p += v->size();
  }
}

namespace {
// Writes a packed lower triangle, scaled and mapped, as a dense T x T matrix.
template <typename F>
void to_dense(const std::vector<double>& packed, int T, double* out, F f) {
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const int64_t base = row_start(i);
    double* row = out + int64_t(i) * T;
    for (int j = 0; j <= i; ++j) row[j] = f(packed[base + j]);
    for (int j = i + 1; j < T; ++j) row[j] = 0.0;
  }
}
}  // namespace

void HeadStatsAccumulator::mean_matrix(double* out) const {
  require_count(1, "mean_matrix");
  to_dense(mean_, T_, out, [](double x) { return x; });
}

void HeadStatsAccumulator::cell_variance_matrix(double* out) const {
  check(needs_.cell_variance, "saf::HeadStatsAccumulator: cell variance was not accumulated");
  require_count(2, "cell_variance_matrix");
  const double inv = 1.0 / double(count_ - 1);
  to_dense(cell_m2_, T_, out, [inv](double x) { return std::max(x * inv, 0.0); });
}

void HeadStatsAccumulator::logit_mean_matrix(double* out) const {
  check(needs_.logit_mean, "saf::HeadStatsAccumulator: logit mean was not accumulated");
  require_count(1, "logit_mean_matrix");
  to_dense(logit_mean_, T_, out, [](double x) { return x; });
}

void HeadStatsAccumulator::logit_std_matrix(double* out) const {
  check(needs_.logit_variance, "saf::HeadStatsAccumulator: logit variance was not accumulated");
  require_count(2, "logit_std_matrix");
  const double inv = 1.0 / double(count_ - 1);
  to_dense(logit_m2_, T_, out, [inv](double x) { return std::sqrt(std::max(x * inv, 0.0)); });
}

double HeadStatsAccumulator::variance_score() const {
  require_count(2, "variance_score");
  const double TT = double(T_) * double(T_);
  return std::max(m2_total_, 0.0) / (double(count_ - 1) * TT);
}

double HeadStatsAccumulator::variance_score_from_cells() const {
  check(needs_.cell_variance, "saf::HeadStatsAccumulator: cell variance was not accumulated");
  require_count(2, "variance_score_from_cells");
  double sum = 0.0;  // upper-triangle cells contribute variance 0
  for (double m2 : cell_m2_) sum += m2 / double(count_ - 1);
  return sum / (double(T_) * double(T_));
}

double HeadStatsAccumulator::kl_score() const {
  check(needs_.kl, "saf::HeadStatsAccumulator: the KL score was not accumulated");
  require_count(1, "kl_score");
  // Rows in parallel, summed in row order (the same sum on any thread count).
  std::vector<double> rows(static_cast<size_t>(T_));
  const int T = T_;
#pragma omp parallel for schedule(dynamic, 16)
  for (int i = 0; i < T; ++i) rows[size_t(i)] = row_neg_entropy(mean_.data() + row_start(i), i + 1);
  double mean_negent = 0.0;
  for (int i = 0; i < T_; ++i) mean_negent += rows[size_t(i)];
  const double kl = neg_entropy_sum_ / (double(count_) * T_) - mean_negent / T_;
  return std::max(kl, 0.0);
}

double variance_score_eq1(const std::vector<const double*>& samples, int T) {
  const auto N = static_cast<int64_t>(samples.size());
  check(N >= 2, "saf::variance_score_eq1: needs at least 2 samples");
  const int64_t TT = int64_t(T) * T;
  std::vector<double> mean(static_cast<size_t>(TT), 0.0);
  for (const double* a : samples)
    for (int64_t c = 0; c < TT; ++c) mean[c] += a[c];
  for (double& m : mean) m /= double(N);
  double sq = 0.0;
  for (const double* a : samples)
    for (int64_t c = 0; c < TT; ++c) sq += (a[c] - mean[c]) * (a[c] - mean[c]);
  return sq / (double(N - 1) * double(TT));
}

double row_normalised_neg_entropy(const double* A, int T) {
  double acc = 0.0;
  for (int i = 0; i < T; ++i) acc += row_neg_entropy(A + int64_t(i) * T, i + 1);
  return acc;
}

}  // namespace hw::saf

#include "headwise/methods/saf/patterns.hpp"

#include <algorithm>
#include <cmath>

#include "headwise/core/error.hpp"

namespace hw::saf {

PatternKind parse_pattern(const std::string& name) {
  if (name == "mean") return PatternKind::Mean;
  if (name == "sharp_mean") return PatternKind::SharpMean;
  if (name == "gaussian") return PatternKind::Gaussian;
  if (name == "dirichlet") return PatternKind::Dirichlet;
  if (name == "structured_random") return PatternKind::StructuredRandom;
  fail("unknown SAF pattern '" + name +
       "' (expected mean, sharp_mean, gaussian, dirichlet or structured_random)");
}

std::string pattern_name(PatternKind kind) {
  switch (kind) {
    case PatternKind::Mean: return "mean";
    case PatternKind::SharpMean: return "sharp_mean";
    case PatternKind::Gaussian: return "gaussian";
    case PatternKind::Dirichlet: return "dirichlet";
    case PatternKind::StructuredRandom: return "structured_random";
  }
  fail("bad SAF pattern kind");
}

StatsNeeds needs_for(PatternKind kind) {
  StatsNeeds n;
  n.cell_variance = kind == PatternKind::Dirichlet;
  n.logit_mean = kind == PatternKind::SharpMean || kind == PatternKind::Gaussian;
  n.logit_variance = kind == PatternKind::Gaussian;
  return n;
}

Rng head_rng(uint64_t seed, int flat_head_index) {
  check(flat_head_index >= 0, "saf::head_rng: negative head index");
  // An odd-constant multiply keeps distinct heads on distinct splitmix64 seeds.
  return Rng(seed ^ (0xD1B54A32D192ED03ull * (uint64_t(flat_head_index) + 1)));
}

void causal_softmax(const double* logits, int T, double* out) {
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const double* s = logits + int64_t(i) * T;
    double* p = out + int64_t(i) * T;
    double m = -INFINITY;
    for (int j = 0; j <= i; ++j) m = std::max(m, s[j]);
    double sum = 0.0;
    for (int j = 0; j <= i; ++j) {
      p[j] = std::exp(s[j] - m);
      sum += p[j];
    }
    const double inv = 1.0 / sum;
    for (int j = 0; j <= i; ++j) p[j] *= inv;
    for (int j = i + 1; j < T; ++j) p[j] = 0.0;
  }
}

void mean_pattern(const HeadStatsAccumulator& stats, double* out) { stats.mean_matrix(out); }

void sharp_mean_pattern(const HeadStatsAccumulator& stats, double* out) {
  const int T = stats.T();
  std::vector<double> logits(size_t(T) * T);
  stats.logit_mean_matrix(logits.data());
  causal_softmax(logits.data(), T, out);
}

void gaussian_pattern(const HeadStatsAccumulator& stats, Rng& rng, double* out) {
  const int T = stats.T();
  std::vector<double> mean(size_t(T) * T), sd(size_t(T) * T);
  stats.logit_mean_matrix(mean.data());
  stats.logit_std_matrix(sd.data());
  for (int i = 0; i < T; ++i)  // serial: the draw order is part of the pattern
    for (int j = 0; j <= i; ++j) {
      const size_t c = size_t(i) * T + j;
      mean[c] += sd[c] * rng.normal();
    }
  causal_softmax(mean.data(), T, out);
}

double log_gamma_draw(double shape, Rng& rng) {
  check(shape > 0 && std::isfinite(shape), "saf::log_gamma_draw: shape must be positive");
  if (shape < 1.0) {
    double u;
    do u = rng.uniform();
    while (u <= 0.0);
    return log_gamma_draw(shape + 1.0, rng) + std::log(u) / shape;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    double u;
    do u = rng.uniform();
    while (u <= 0.0);
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v)))
      return std::log(d) + std::log(v);
  }
}

void dirichlet_pattern(const double* mean, const double* variance, int T, Rng& rng, double* out,
                       const DirichletOptions& opt, DirichletInfo* info) {
  check(opt.min_concentration > 0 && opt.max_concentration >= opt.min_concentration &&
            opt.shape_floor > 0,
        "saf::dirichlet_pattern: invalid concentration bounds");
  constexpr double kTiny = 1e-8;
  if (info) {
    info->concentration.assign(size_t(T), 0.0);
    info->deterministic.assign(size_t(T), 0);
  }
  std::vector<double> mu(static_cast<size_t>(T)), logg(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i) {  // serial: the draw order is part of the pattern
    const double* m = mean + int64_t(i) * T;
    const double* v = variance + int64_t(i) * T;
    double* p = out + int64_t(i) * T;
    const int n = i + 1;
    double msum = 0.0, vsum = 0.0;
    for (int j = 0; j < n; ++j) {
      mu[j] = std::max(m[j], 0.0);
      msum += mu[j];
      vsum += std::max(v[j], 0.0);
    }
    double sq = 0.0;
    for (int j = 0; j < n; ++j) {
      mu[j] = (mu[j] + 1e-12) / (msum + 1e-12 * n);
      sq += mu[j] * mu[j];
    }
    const double numer = 1.0 - sq;
    double conc;
    if (vsum <= kTiny || numer <= kTiny) {
      conc = opt.max_concentration;
    } else {
      conc = numer / vsum - 1.0;
      if (!std::isfinite(conc) || conc <= 0) conc = opt.min_concentration;
    }
    conc = std::clamp(conc, opt.min_concentration, opt.max_concentration);
    const bool deterministic = n == 1 || vsum <= kTiny || numer <= kTiny;
    if (info) {
      info->concentration[i] = conc;
      info->deterministic[i] = deterministic ? 1 : 0;
    }
    if (deterministic) {
      for (int j = 0; j < n; ++j) p[j] = mu[j];
    } else {
      double lmax = -INFINITY;
      for (int j = 0; j < n; ++j) {
        logg[j] = log_gamma_draw(std::max(mu[j] * conc, opt.shape_floor), rng);
        lmax = std::max(lmax, logg[j]);
      }
      double sum = 0.0;
      for (int j = 0; j < n; ++j) {
        p[j] = std::exp(logg[j] - lmax);
        sum += p[j];
      }
      for (int j = 0; j < n; ++j) p[j] /= sum;
    }
    for (int j = n; j < T; ++j) p[j] = 0.0;
  }
}

void dirichlet_pattern(const HeadStatsAccumulator& stats, Rng& rng, double* out,
                       const DirichletOptions& opt, DirichletInfo* info) {
  const int T = stats.T();
  std::vector<double> mean(size_t(T) * T), var(size_t(T) * T);
  stats.mean_matrix(mean.data());
  stats.cell_variance_matrix(var.data());
  dirichlet_pattern(mean.data(), var.data(), T, rng, out, opt, info);
}

void structured_random(int T, Rng& rng, std::vector<double>& alpha, std::vector<double>& rho,
                       double std_dev) {
  check(T >= 1, "saf::structured_random: T must be >= 1");
  alpha.resize(static_cast<size_t>(T));
  rho.resize(static_cast<size_t>(T));
  for (double& a : alpha) a = std_dev * rng.normal();
  for (double& r : rho) r = std_dev * rng.normal();
}

}  // namespace hw::saf

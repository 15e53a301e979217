#include "headwise/methods/oal/baselines.hpp"

#include <algorithm>
#include <cmath>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"

namespace hw::oal {

KernelKind parse_kernel(const std::string& text, const std::string& key) {
  if (text == "oal") return KernelKind::Oal;
  if (text == "performer") return KernelKind::Performer;
  if (text == "dijiang") return KernelKind::DiJiang;
  if (text == "taylorshift") return KernelKind::TaylorShift;
  fail(key + " is \"" + text + "\"; expected oal, performer, dijiang or taylorshift");
}

std::string kernel_name(KernelKind k) {
  switch (k) {
    case KernelKind::Oal: return "oal";
    case KernelKind::Performer: return "performer";
    case KernelKind::DiJiang: return "dijiang";
    case KernelKind::TaylorShift: return "taylorshift";
  }
  return "?";
}

attn::HeadSpec BaselineHead::spec() const {
  attn::HeadSpec s;
  switch (kind) {
    case KernelKind::Performer:
      s.kind = attn::HeadKind::Performer;
      s.features = performer.n_features;
      break;
    case KernelKind::DiJiang: s.kind = attn::HeadKind::DiJiang; break;
    case KernelKind::TaylorShift: s.kind = attn::HeadKind::TaylorShift; break;
    case KernelKind::Oal: fail("OAL: the grouped kernel is not a baseline head");
  }
  return s;
}

void BaselineHead::add_to(HeadExtras& extras, int layer, int head) const {
  switch (kind) {
    case KernelKind::Performer: extras.performers[{layer, head}] = performer; break;
    case KernelKind::DiJiang: extras.dijiangs[{layer, head}] = dijiang; break;
    case KernelKind::TaylorShift: extras.taylorshifts[{layer, head}] = taylorshift; break;
    case KernelKind::Oal: fail("OAL: the grouped kernel is not a baseline head");
  }
}

BaselineHead baseline_head(KernelKind kind, int head_dim, int performer_features, uint64_t seed, int layer, int head,
                           int n_head) {
  BaselineHead b;
  b.kind = kind;
  switch (kind) {
    case KernelKind::Performer:
      b.performer = draw_performer_features(
          head_dim, performer_features,
          data::derive_seed(seed, data::Stream::OalBaselineFeatures, uint64_t(layer) * uint64_t(n_head) + uint64_t(head)));
      break;
    case KernelKind::DiJiang: b.dijiang = default_dijiang_values(head_dim); break;
    case KernelKind::TaylorShift: b.taylorshift = default_taylorshift_values(); break;
    case KernelKind::Oal: fail("OAL: the grouped kernel is not a baseline head");
  }
  return b;
}

namespace {

// Row t of x (q or k) in double.
std::vector<double> row(const float* x, int64_t stride, int t, int d) {
  std::vector<double> r(static_cast<size_t>(d));
  for (int c = 0; c < d; ++c) r[size_t(c)] = double(x[int64_t(t) * stride + c]);
  return r;
}

}  // namespace

std::vector<std::vector<double>> baseline_rows(const HeadRows& h, const BaselineHead& b, bool query) {
  const int d = h.d;
  const double in = 1.0 / std::pow(double(d), 0.25);
  std::vector<std::vector<double>> out(static_cast<size_t>(h.T));
  const float* x = query ? h.q : h.k;
  const int64_t stride = query ? h.q_stride : h.k_stride;
  const double pi = std::acos(-1.0);
  std::vector<double> dct;  // dijiang: C[m][c], the orthonormal DCT-II
  if (b.kind == KernelKind::DiJiang)
    for (int m = 0; m < d; ++m)
      for (int c = 0; c < d; ++c) dct.push_back(std::sqrt((m == 0 ? 1.0 : 2.0) / d) * std::cos(pi * (c + 0.5) * m / d));
  for (int t = 0; t < h.T; ++t) {
    std::vector<double> xs = row(x, stride, t, d);
    std::vector<double>& f = out[size_t(t)];
    if (b.kind == KernelKind::TaylorShift) {  // unit rows (a zero row stays zero: s = 0)
      double n = 0;
      for (double e : xs) n += e * e;
      n = std::sqrt(n);
      for (double& e : xs) e = n > 0 ? e / n : 0.0;
      f = std::move(xs);
      continue;
    }
    for (double& e : xs) e *= in;
    if (b.kind == KernelKind::Performer) {
      const int M = b.performer.n_features;
      double sq = 0;
      for (double e : xs) sq += e * e;
      f.resize(size_t(M));
      for (int m = 0; m < M; ++m) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += double(b.performer.W[size_t(m) * size_t(d) + size_t(c)]) * xs[size_t(c)];
        f[size_t(m)] = std::exp(dot - 0.5 * sq) / std::sqrt(double(M));
      }
    } else {  // dijiang: softmax over the orthonormal DCT-II of x', weighted on the query side
      f.resize(size_t(d));
      double mx = -INFINITY;
      for (int m = 0; m < d; ++m) {
        double z = 0;
        for (int c = 0; c < d; ++c) z += dct[size_t(m * d + c)] * xs[size_t(c)];
        f[size_t(m)] = z;
        mx = std::max(mx, z);
      }
      double s = 0;
      for (double& e : f) s += (e = std::exp(e - mx));
      for (int m = 0; m < d; ++m) {
        f[size_t(m)] /= s;
        if (query) f[size_t(m)] *= std::exp(double(b.dijiang.log_w[size_t(m)]));
      }
    }
  }
  return out;
}

void baseline_outputs(const HeadRows& h, const BaselineHead& b, double* out) {
  const int T = h.T, d = h.d;
  const std::vector<std::vector<double>> fq = baseline_rows(h, b, true), fk = baseline_rows(h, b, false);
  for (int i = 0; i < T; ++i) {
    double* o = out + int64_t(i) * d;
    std::fill(o, o + d, 0.0);
    double den = 0;
    for (int j = 0; j <= i; ++j) {
      double kap = 0;
      const std::vector<double>& a = fq[size_t(i)];
      const std::vector<double>& kj = fk[size_t(j)];
      for (size_t m = 0; m < a.size(); ++m) kap += a[m] * kj[m];
      if (b.kind == KernelKind::TaylorShift) {
        const double s = double(b.taylorshift.tau) * kap;
        kap = 1.0 + s + 0.5 * s * s;
      }
      den += kap;
      const float* vj = h.v + int64_t(j) * h.v_stride;
      for (int c = 0; c < d; ++c) o[c] += kap * double(vj[c]);
    }
    check(den > 0 && std::isfinite(den), "OAL: the " + kernel_name(b.kind) + " kernel gave a non-positive or non-finite "
                                         "denominator at position " + std::to_string(i));
    for (int c = 0; c < d; ++c) o[c] /= den;
  }
}

}  // namespace hw::oal

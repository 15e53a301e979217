#include "headwise/calibration/head_forward_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"

namespace hw {

namespace {

struct MeanAbsStd {
  double mean_abs = 0, std = 0;
};

// Over rows x [col, col + width) of a row-major [rows, ld] block; two passes (mean, then the
// centred squares) so the standard deviation does not cancel.
MeanAbsStd block_moments(const std::vector<double>& x, int64_t rows, int64_t ld, int64_t col, int64_t width) {
  const double n = double(rows * width);
  double sum = 0, sum_abs = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const double e = x[size_t(r * ld + c)];
      sum += e;
      sum_abs += std::fabs(e);
    }
  const double mean = sum / n;
  double m2 = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = col; c < col + width; ++c) {
      const double d = x[size_t(r * ld + c)] - mean;
      m2 += d * d;
    }
  return {sum_abs / n, std::sqrt(m2 / n)};
}

// The visible keys of a softmax-family head: the rule the tile kernels use.
tiles::KeyRule key_rule(const attn::HeadSpec& spec, int64_t T) {
  switch (spec.kind) {
    case attn::HeadKind::Window: return {0, spec.window};
    case attn::HeadKind::SinkWindow: return {spec.sink, spec.window};
    default: return {0, std::max<int64_t>(T, 1)};
  }
}

}  // namespace

std::vector<HeadForwardStats> head_forward_stats(const AttentionView& v, int64_t row_stride) {
  check(v.plan && v.layout && v.qkv && v.out, "head_forward_stats: incomplete attention view");
  check(row_stride >= 1, "head_forward_stats: row_stride must be >= 1");
  const auto& lay = *v.layout;
  const int64_t B = v.B, T = v.T, N = B * T, W = lay.qkv_width(), O = lay.out_width(), D = lay.head_dim;
  const double rs = 1.0 / std::sqrt(double(D)), logT = T > 1 ? std::log(double(T)) : 0.0;
  std::vector<HeadForwardStats> out(size_t(lay.n_head));
  std::vector<double> s(static_cast<size_t>(T));  // one row of logits
  for (int h = 0; h < lay.n_head; ++h) {
    HeadForwardStats& st = out[size_t(h)];
    const attn::HeadSpec& spec = (*v.plan)[size_t(h)];
    const int g = lay.kv_head_of(h);
    if (lay.q_slot[size_t(h)] >= 0) {
      const MeanAbsStd m = block_moments(*v.qkv, N, W, lay.q_col(h), D);
      st.mean_abs_q = m.mean_abs;
      st.std_q = m.std;
    }
    if (lay.k_slot[size_t(g)] >= 0) {
      const MeanAbsStd m = block_moments(*v.qkv, N, W, lay.k_col(g), D);
      st.mean_abs_k = m.mean_abs;
      st.std_k = m.std;
    }
    if (lay.v_slot[size_t(g)] >= 0) {
      const MeanAbsStd m = block_moments(*v.qkv, N, W, lay.v_col(g), D);
      st.mean_abs_v = m.mean_abs;
      st.std_v = m.std;
    }
    if (lay.o_slot[size_t(h)] >= 0) {
      double norms = 0;
      for (int64_t r = 0; r < N; ++r) {
        double sq = 0;
        for (int64_t d = 0; d < D; ++d) sq += (*v.out)[size_t(r * O + lay.out_col(h) + d)] * (*v.out)[size_t(r * O + lay.out_col(h) + d)];
        norms += std::sqrt(sq);
      }
      st.output_norm = norms / double(N);
    }
    if (!spec.softmax_family()) continue;
    const tiles::KeyRule rule = key_rule(spec, T);
    double entropy = 0, last = 0, rows = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; i += row_stride) {
        const double* q = &(*v.qkv)[size_t((b * T + i) * W + lay.q_col(h))];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          if (!tiles::key_visible(rule, i, j)) continue;
          const double* k = &(*v.qkv)[size_t((b * T + j) * W + lay.k_col(g))];
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
          s[size_t(j)] = rs * dot;
          mx = std::max(mx, s[size_t(j)]);
        }
        double z = 0, zs = 0;  // sum e^(s - mx), sum e^(s - mx) (s - mx)
        for (int64_t j = 0; j <= i; ++j) {
          if (!tiles::key_visible(rule, i, j)) continue;
          const double e = std::exp(s[size_t(j)] - mx);
          z += e;
          zs += e * (s[size_t(j)] - mx);
        }
        // H = -sum p log p = log z - sum p (s - mx)
        if (logT > 0) entropy += (std::log(z) - zs / z) / logT;
        last += std::exp(s[size_t(i)] - mx) / z;  // key i is always visible (window >= 1)
        rows += 1;
      }
    st.entropy = entropy / rows;
    st.last_key_weight = last / rows;
  }
  return out;
}

}  // namespace hw
